"""dispatch idempotency keys: a dispatch sent again with its key answers with the job it made

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07

``dispatch_keys`` holds each key a caller sent with a dispatch, the job it made and a fingerprint
of the request. A key lives as long as its job: a trigger on ``workers`` deletes the keys of the
jobs a statement deletes (one statement per DELETE on PostgreSQL, as for the attempts of 0003),
so retention and job removal need no step of their own and ``workers`` keeps no foreign key to
check on every delete. Dispatches without a key touch nothing here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

TRIGGER = "workers_dispatch_keys_drop"
PG_FUNCTION = """
CREATE OR REPLACE FUNCTION dispatch_keys_drop() RETURNS trigger AS $$
BEGIN
  DELETE FROM dispatch_keys WHERE worker_id IN (SELECT id FROM old_rows);
  RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
PG_TRIGGER = (
    f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON workers "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION dispatch_keys_drop()"
)
SQLITE_TRIGGER = (
    f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON workers BEGIN "
    "DELETE FROM dispatch_keys WHERE worker_id = OLD.id; END"
)


def upgrade() -> None:
    op.create_table(
        "dispatch_keys",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_dispatch_keys")),
    )
    op.create_index("ix_dispatch_keys_worker_id", "dispatch_keys", ["worker_id"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        op.execute(PG_TRIGGER)
    else:
        op.execute(SQLITE_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON workers")
        op.execute("DROP FUNCTION IF EXISTS dispatch_keys_drop()")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
    op.drop_index("ix_dispatch_keys_worker_id", table_name="dispatch_keys")
    op.drop_table("dispatch_keys")
