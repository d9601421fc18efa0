"""worker counts kept by triggers

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# PostgreSQL: statement-level triggers with transition tables, so a bulk change (clear-queue,
# COPY) costs one aggregate per statement, and counter rows are locked in one sorted order
# (no deadlock between concurrent transitions).
PG_FUNCTION = """
CREATE OR REPLACE FUNCTION worker_counts_apply() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO worker_counts AS c (queue, status, n)
      SELECT queue, status, count(*) FROM new_rows GROUP BY queue, status ORDER BY queue, status
      ON CONFLICT (queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO worker_counts AS c (queue, status, n)
      SELECT queue, status, -count(*) FROM old_rows GROUP BY queue, status ORDER BY queue, status
      ON CONFLICT (queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;
  ELSE
    INSERT INTO worker_counts AS c (queue, status, n)
      SELECT queue, status, sum(d) FROM (
        SELECT queue, status, 1 AS d FROM new_rows
        UNION ALL
        SELECT queue, status, -1 AS d FROM old_rows
      ) AS changes
      GROUP BY queue, status HAVING sum(d) <> 0 ORDER BY queue, status
      ON CONFLICT (queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
"""
PG_TRIGGERS = [
    "CREATE TRIGGER workers_counts_insert AFTER INSERT ON workers "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION worker_counts_apply()",
    "CREATE TRIGGER workers_counts_update AFTER UPDATE ON workers "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION worker_counts_apply()",
    "CREATE TRIGGER workers_counts_delete AFTER DELETE ON workers "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION worker_counts_apply()",
]

# SQLite has row triggers only; its single writer makes ordering moot.
SQLITE_BUMP = (
    "INSERT INTO worker_counts (queue, status, n) VALUES ({q}, {s}, {d}) "
    "ON CONFLICT (queue, status) DO UPDATE SET n = n + ({d});"
)
SQLITE_TRIGGERS = [
    "CREATE TRIGGER workers_counts_insert AFTER INSERT ON workers BEGIN "
    + SQLITE_BUMP.format(q="NEW.queue", s="NEW.status", d="1")
    + " END",
    "CREATE TRIGGER workers_counts_update AFTER UPDATE OF status, queue ON workers "
    "WHEN OLD.status IS NOT NEW.status OR OLD.queue IS NOT NEW.queue BEGIN "
    + SQLITE_BUMP.format(q="OLD.queue", s="OLD.status", d="-1")
    + " "
    + SQLITE_BUMP.format(q="NEW.queue", s="NEW.status", d="1")
    + " END",
    "CREATE TRIGGER workers_counts_delete AFTER DELETE ON workers BEGIN "
    + SQLITE_BUMP.format(q="OLD.queue", s="OLD.status", d="-1")
    + " END",
]
TRIGGER_NAMES = ["workers_counts_insert", "workers_counts_update", "workers_counts_delete"]


def upgrade() -> None:
    op.create_table(
        "worker_counts",
        sa.Column("queue", sa.String(length=50), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("queue", "status", name=op.f("pk_worker_counts")),
    )
    op.execute(
        "INSERT INTO worker_counts (queue, status, n) "
        "SELECT queue, status, count(*) FROM workers GROUP BY queue, status"
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(PG_FUNCTION)
        for statement in PG_TRIGGERS:
            op.execute(statement)
    else:
        for statement in SQLITE_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in TRIGGER_NAMES:
        op.execute(
            f"DROP TRIGGER IF EXISTS {name} ON workers" if postgres else f"DROP TRIGGER IF EXISTS {name}"
        )
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS worker_counts_apply()")
    op.drop_table("worker_counts")
