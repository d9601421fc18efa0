"""Client companies: the minimal directory jobs point at."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from worker_automation.domain.documents import is_valid_cnpj
from worker_automation.domain.errors import BadInput, Conflict
from worker_automation.domain.shapes import Doc
from worker_automation.models import Cliente
from worker_automation.models.database import Database


@dataclass(frozen=True)
class ClienteView:
    id: Annotated[int, Doc("Internal id (what jobs' clienteId points at).")]
    razao_social: Annotated[str, Doc("Registered company name.")]
    cnpj: Annotated[str | None, Doc("CNPJ, digits only.")]


async def add_cliente(db: Database, *, razao_social: str, cnpj: str | None = None) -> ClienteView:
    name = (razao_social or "").strip()
    if not name:
        raise BadInput("razao_social", "razao_social e obrigatoria")
    digits = None
    if cnpj:
        digits = re.sub(r"\D", "", cnpj)
        if not is_valid_cnpj(digits):
            raise BadInput("cnpj", f"CNPJ invalido: {cnpj!r}")
    try:
        async with db.session() as session:
            row = Cliente(razao_social=name, cnpj=digits)
            session.add(row)
            await session.flush()
            return ClienteView(row.id, row.razao_social, row.cnpj)
    except IntegrityError:
        raise Conflict(f"Ja existe um cliente com o CNPJ {digits}.", status="exists") from None


async def list_clientes(db: Database, limit: int = 500) -> list[ClienteView]:
    async with db.session() as session:
        rows = await session.scalars(select(Cliente).order_by(Cliente.razao_social).limit(limit))
        return [ClienteView(r.id, r.razao_social, r.cnpj) for r in rows.all()]


async def clientes_by_id(db: Database, ids: list[int]) -> dict[int, ClienteView]:
    """Batch lookup (for DataLoaders): one query for any number of ids."""
    if not ids:
        return {}
    async with db.session() as session:
        rows = await session.scalars(select(Cliente).where(Cliente.id.in_(ids)))
        return {r.id: ClienteView(r.id, r.razao_social, r.cnpj) for r in rows.all()}
