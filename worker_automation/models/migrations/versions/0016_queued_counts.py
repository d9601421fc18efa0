"""queued jobs per queue and priority, kept by triggers: a queued job's place without ranking

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04

A queued job's place in its queue is the number of queued jobs of that queue with a smaller
priority, plus its place among the jobs of its own priority. ``queued_counts`` holds the first
part's terms; the second is a short walk along the index of queued jobs (see
``resolvers.waiting``). Kept like ``worker_counts`` (0002): statement-level triggers with
transition tables on PostgreSQL, counter rows locked in one sorted order; row triggers on SQLite.
Only rows whose status is or was AGENDADO count, so the counters change only when a job joins or
leaves a backlog or moves within one (another queue, another priority).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

PG_FUNCTION = """
CREATE OR REPLACE FUNCTION queued_counts_apply() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO queued_counts AS c (queue, priority, n)
      SELECT queue, priority, count(*) FROM new_rows WHERE status = 'AGENDADO'
      GROUP BY queue, priority ORDER BY queue, priority
      ON CONFLICT (queue, priority) DO UPDATE SET n = c.n + EXCLUDED.n;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO queued_counts AS c (queue, priority, n)
      SELECT queue, priority, -count(*) FROM old_rows WHERE status = 'AGENDADO'
      GROUP BY queue, priority ORDER BY queue, priority
      ON CONFLICT (queue, priority) DO UPDATE SET n = c.n + EXCLUDED.n;
  ELSE
    INSERT INTO queued_counts AS c (queue, priority, n)
      SELECT queue, priority, sum(d) FROM (
        SELECT queue, priority, 1 AS d FROM new_rows WHERE status = 'AGENDADO'
        UNION ALL
        SELECT queue, priority, -1 AS d FROM old_rows WHERE status = 'AGENDADO'
      ) AS changes
      GROUP BY queue, priority HAVING sum(d) <> 0 ORDER BY queue, priority
      ON CONFLICT (queue, priority) DO UPDATE SET n = c.n + EXCLUDED.n;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
"""
PG_TRIGGERS = [
    "CREATE TRIGGER workers_queued_counts_insert AFTER INSERT ON workers "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION queued_counts_apply()",
    "CREATE TRIGGER workers_queued_counts_update AFTER UPDATE ON workers "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION queued_counts_apply()",
    "CREATE TRIGGER workers_queued_counts_delete AFTER DELETE ON workers "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION queued_counts_apply()",
]

SQLITE_BUMP = (
    "INSERT INTO queued_counts (queue, priority, n) SELECT {r}.queue, {r}.priority, {d} "
    "WHERE {r}.status = 'AGENDADO' "
    "ON CONFLICT (queue, priority) DO UPDATE SET n = n + ({d});"
)
SQLITE_TRIGGERS = [
    "CREATE TRIGGER workers_queued_counts_insert AFTER INSERT ON workers WHEN NEW.status = 'AGENDADO' BEGIN "
    + SQLITE_BUMP.format(r="NEW", d="1")
    + " END",
    "CREATE TRIGGER workers_queued_counts_update AFTER UPDATE OF status, queue, priority ON workers "
    "WHEN (OLD.status = 'AGENDADO' OR NEW.status = 'AGENDADO') AND (OLD.status IS NOT NEW.status "
    "OR OLD.queue IS NOT NEW.queue OR OLD.priority IS NOT NEW.priority) BEGIN "
    + SQLITE_BUMP.format(r="OLD", d="-1")
    + " "
    + SQLITE_BUMP.format(r="NEW", d="1")
    + " END",
    "CREATE TRIGGER workers_queued_counts_delete AFTER DELETE ON workers WHEN OLD.status = 'AGENDADO' BEGIN "
    + SQLITE_BUMP.format(r="OLD", d="-1")
    + " END",
]
TRIGGER_NAMES = [
    "workers_queued_counts_insert",
    "workers_queued_counts_update",
    "workers_queued_counts_delete",
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "queued_counts",
        sa.Column("queue", sa.String(length=50), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("queue", "priority", name=op.f("pk_queued_counts")),
    )
    if postgres:
        # No job may change between the count below and the triggers taking over (readers go on).
        op.execute("LOCK TABLE workers IN SHARE ROW EXCLUSIVE MODE")
    op.execute(
        "INSERT INTO queued_counts (queue, priority, n) "
        "SELECT queue, priority, count(*) FROM workers WHERE status = 'AGENDADO' GROUP BY queue, priority"
    )
    if postgres:
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
        op.execute("DROP FUNCTION IF EXISTS queued_counts_apply()")
    op.drop_table("queued_counts")
