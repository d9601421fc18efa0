"""finished jobs per hour of their end, queue and status, kept by triggers: the total of a list
bounded by finish time without counting its rows

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04

A list of the jobs that finished in a week holds a quarter of a month's rows: counting them took
30 ms at 1M rows and ten times that at 10M. ``finished_counts`` holds, per hour (``slot``, seconds
since the epoch divided by 3600) of ``data_fim``, queue and status, how many rows end there; a
range's total is the sum of the slots it covers whole plus a count of the rows in the parts of the
(at most two) slots it cuts (see ``resolvers.counts.finished_total``). Kept like
``worker_counts`` (0002): statement-level triggers with transition tables on PostgreSQL, counter
rows written in one sorted order; row triggers on SQLite. Unlike the automation rollups (0010)
these count the rows there are: deleting a job takes it off.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

PG_SLOT = "floor(date_part('epoch', data_fim) / 3600)::integer"
PG_UPSERT = "ON CONFLICT (slot, queue, status) DO UPDATE SET n = c.n + EXCLUDED.n;"
PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION finished_counts_apply() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO finished_counts AS c (slot, queue, status, n)
      SELECT {PG_SLOT}, queue, status, count(*) FROM new_rows WHERE data_fim IS NOT NULL
      GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
      {PG_UPSERT}
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO finished_counts AS c (slot, queue, status, n)
      SELECT {PG_SLOT}, queue, status, -count(*) FROM old_rows WHERE data_fim IS NOT NULL
      GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
      {PG_UPSERT}
  ELSE
    INSERT INTO finished_counts AS c (slot, queue, status, n)
      SELECT slot, queue, status, sum(d) FROM (
        SELECT {PG_SLOT} AS slot, queue, status, 1 AS d FROM new_rows WHERE data_fim IS NOT NULL
        UNION ALL
        SELECT {PG_SLOT} AS slot, queue, status, -1 AS d FROM old_rows WHERE data_fim IS NOT NULL
      ) AS changes
      GROUP BY slot, queue, status HAVING sum(d) <> 0 ORDER BY slot, queue, status
      {PG_UPSERT}
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
"""
PG_TRIGGERS = [
    "CREATE TRIGGER workers_finished_counts_insert AFTER INSERT ON workers "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION finished_counts_apply()",
    "CREATE TRIGGER workers_finished_counts_update AFTER UPDATE ON workers "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION finished_counts_apply()",
    "CREATE TRIGGER workers_finished_counts_delete AFTER DELETE ON workers "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION finished_counts_apply()",
]

# SQLite keeps timestamps as UTC text (``YYYY-MM-DD HH:MM:SS.ffffff``).
SQLITE_SLOT = "CAST(strftime('%s', substr({r}.data_fim, 1, 19)) AS INTEGER) / 3600"
SQLITE_BUMP = (
    "INSERT INTO finished_counts (slot, queue, status, n) "
    "SELECT " + SQLITE_SLOT + ", {r}.queue, {r}.status, {d} WHERE {r}.data_fim IS NOT NULL "
    "ON CONFLICT (slot, queue, status) DO UPDATE SET n = n + ({d});"
)
SQLITE_TRIGGERS = [
    "CREATE TRIGGER workers_finished_counts_insert AFTER INSERT ON workers "
    "WHEN NEW.data_fim IS NOT NULL BEGIN " + SQLITE_BUMP.format(r="NEW", d="1") + " END",
    "CREATE TRIGGER workers_finished_counts_update AFTER UPDATE OF status, queue, data_fim ON workers "
    "WHEN (OLD.data_fim IS NOT NULL OR NEW.data_fim IS NOT NULL) AND (OLD.status IS NOT NEW.status "
    "OR OLD.queue IS NOT NEW.queue OR OLD.data_fim IS NOT NEW.data_fim) BEGIN "
    + SQLITE_BUMP.format(r="OLD", d="-1")
    + " "
    + SQLITE_BUMP.format(r="NEW", d="1")
    + " END",
    "CREATE TRIGGER workers_finished_counts_delete AFTER DELETE ON workers "
    "WHEN OLD.data_fim IS NOT NULL BEGIN " + SQLITE_BUMP.format(r="OLD", d="-1") + " END",
]
TRIGGER_NAMES = [
    "workers_finished_counts_insert",
    "workers_finished_counts_update",
    "workers_finished_counts_delete",
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "finished_counts",
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(length=50), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("slot", "queue", "status", name=op.f("pk_finished_counts")),
    )
    if postgres:
        # No job may change between the count below and the triggers taking over (readers go on).
        op.execute("LOCK TABLE workers IN SHARE ROW EXCLUSIVE MODE")
        slot = PG_SLOT
    else:
        slot = SQLITE_SLOT.format(r="workers")
    op.execute(
        f"INSERT INTO finished_counts (slot, queue, status, n) SELECT {slot}, queue, status, count(*) "
        "FROM workers WHERE data_fim IS NOT NULL GROUP BY 1, 2, 3"
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
        op.execute("DROP FUNCTION IF EXISTS finished_counts_apply()")
    op.drop_table("finished_counts")
