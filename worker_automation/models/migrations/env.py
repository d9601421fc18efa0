"""Alembic environment: runs on the connection handed in by ``worker_automation.models.migrate``."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext

from worker_automation.models import Base
from worker_automation.models.base import UtcDateTime
from worker_automation.models.job import POSTGRESQL_ONLY_INDEXES


def _render_item(kind: str, obj: Any, autogen: AutogenContext) -> str | Literal[False]:
    # Migrations must not import application types: UtcDateTime is stored as a plain timestamp.
    if kind == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _include(item: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
    # The indexes PostgreSQL alone has are made by their migration, not declared on the models.
    return not (kind == "index" and reflected and compare_to is None and name in POSTGRESQL_ONLY_INDEXES)


config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `worker-automation migrate`")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
    render_item=_render_item,
    include_object=_include,
)
with context.begin_transaction():
    context.run_migrations()
