"""the order indexes carry the columns of their sort keys: a page sorted by finish time or by
duration skips its offset in the index alone

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04

The indexes of 0013 are on each order's sort key (an expression of ``data_fim`` and
``data_inicio``) and the id. PostgreSQL reads an index without the table (an index-only scan)
only when every column a statement names is in the index, and an expression's columns are not:
so a page sorted by DURATION or FINISHED_AT visited the row of every entry it skipped, 640 rows
for page 32. With the key's columns carried (INCLUDE), the skipped entries are read from the
index alone: page 32's ids at 1M rows, 1.2 -> 0.23 ms. PostgreSQL only, as the indexes are.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# What each order's key is computed from, carried beside status and queue.
KEY_COLUMNS = {
    "ix_workers_finished_desc": "data_fim",
    "ix_workers_finished_asc": "data_fim",
    "ix_workers_duration_desc": "data_fim, data_inicio",
    "ix_workers_duration_asc": "data_fim, data_inicio",
}


def _read_path_indexes() -> ModuleType:
    """The revision that made the order indexes (0013): their sort keys, as the page writes them."""
    return importlib.import_module("worker_automation.models.migrations.versions.0013_read_path_indexes")


def _recreate(carried: dict[str, str]) -> None:
    for name, key in _read_path_indexes().ORDER_INDEXES.items():
        op.execute(f"DROP INDEX IF EXISTS {name}")
        op.execute(f"CREATE INDEX {name} ON workers ({key}, id) INCLUDE ({carried[name]})")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _recreate({name: f"status, queue, {columns}" for name, columns in KEY_COLUMNS.items()})


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _recreate(dict.fromkeys(KEY_COLUMNS, "status, queue"))
