"""Who may run what: the same rules as the REST API, attached to root fields.

The checks raise the domain's own Unauthenticated / Forbidden errors (with the REST messages), so
:mod:`worker_automation.schema.errors` gives them their codes like any other domain error.
"""

from __future__ import annotations

from typing import Any

from strawberry.extensions import FieldExtension
from strawberry.permission import BasePermission, PermissionExtension

from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE
from worker_automation.schema.context import GraphQLContext, Info


def _context(info: Info) -> GraphQLContext:
    return info.context


class CanRead(BasePermission):
    """An operator key with ``worker_automation:read``."""

    message = "API Key sem o escopo worker_automation:read."

    async def has_permission(self, source: Any, info: Info, **kwargs: Any) -> bool:
        principal = await _context(info).principal()
        principal.require(SCOPE_READ)
        return True


class CanWrite(BasePermission):
    """An operator key with ``worker_automation:write`` (cancel, retry, move, reorder, dispatch)."""

    message = "API Key sem o escopo worker_automation:write."

    async def has_permission(self, source: Any, info: Info, **kwargs: Any) -> bool:
        principal = await _context(info).principal()
        principal.require(SCOPE_WRITE)
        return True


class IsManager(BasePermission):
    """``worker_automation:write`` and perfil administrador or diretoria (maintenance, machines)."""

    message = "Operacao exige perfil administrador ou diretoria."

    async def has_permission(self, source: Any, info: Info, **kwargs: Any) -> bool:
        principal = await _context(info).principal()
        principal.require(SCOPE_WRITE, manager=True)
        return True


class IsMachine(BasePermission):
    """A registered machine's ``X-Worker-Api-Key``."""

    message = "Operacao exige X-Worker-Api-Key de uma maquina registrada."

    async def has_permission(self, source: Any, info: Info, **kwargs: Any) -> bool:
        await _context(info).machine()
        return True


# Fresh extension objects per field: an extension is bound to the field it is applied to.
def read() -> list[FieldExtension]:
    """Field extensions of a read (``:read``)."""
    return [PermissionExtension([CanRead()], use_directives=False)]


def write() -> list[FieldExtension]:
    """Field extensions of a day-to-day action (``:write``)."""
    return [PermissionExtension([CanWrite()], use_directives=False)]


def manager() -> list[FieldExtension]:
    """Field extensions of a destructive or administrative action (``:write`` + manager perfil)."""
    return [PermissionExtension([IsManager()], use_directives=False)]


def machine() -> list[FieldExtension]:
    """Field extensions of what only worker machines use."""
    return [PermissionExtension([IsMachine()], use_directives=False)]
