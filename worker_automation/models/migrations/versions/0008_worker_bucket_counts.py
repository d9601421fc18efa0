"""worker counts by bucket of ids, kept by triggers: deep list pages without long skips

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# A bucket holds the ids ``b << 14`` to ``((b + 1) << 14) - 1`` (``BUCKET_BITS`` of the model).
# Kept like ``worker_counts`` (0002): statement-level triggers with transition tables on
# PostgreSQL, counter rows locked in one sorted order; row triggers on SQLite.
PG_FUNCTION = """
CREATE OR REPLACE FUNCTION worker_bucket_counts_apply() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO worker_bucket_counts AS c (queue, status, bucket, n)
      SELECT queue, status, id >> 14, count(*) FROM new_rows
      GROUP BY queue, status, id >> 14 ORDER BY queue, status, id >> 14
      ON CONFLICT (queue, status, bucket) DO UPDATE SET n = c.n + EXCLUDED.n;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO worker_bucket_counts AS c (queue, status, bucket, n)
      SELECT queue, status, id >> 14, -count(*) FROM old_rows
      GROUP BY queue, status, id >> 14 ORDER BY queue, status, id >> 14
      ON CONFLICT (queue, status, bucket) DO UPDATE SET n = c.n + EXCLUDED.n;
  ELSE
    INSERT INTO worker_bucket_counts AS c (queue, status, bucket, n)
      SELECT queue, status, bucket, sum(d) FROM (
        SELECT queue, status, id >> 14 AS bucket, 1 AS d FROM new_rows
        UNION ALL
        SELECT queue, status, id >> 14 AS bucket, -1 AS d FROM old_rows
      ) AS changes
      GROUP BY queue, status, bucket HAVING sum(d) <> 0 ORDER BY queue, status, bucket
      ON CONFLICT (queue, status, bucket) DO UPDATE SET n = c.n + EXCLUDED.n;
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
"""
PG_TRIGGERS = [
    "CREATE TRIGGER workers_bucket_counts_insert AFTER INSERT ON workers "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION worker_bucket_counts_apply()",
    "CREATE TRIGGER workers_bucket_counts_update AFTER UPDATE ON workers "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION worker_bucket_counts_apply()",
    "CREATE TRIGGER workers_bucket_counts_delete AFTER DELETE ON workers "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION worker_bucket_counts_apply()",
]

SQLITE_BUMP = (
    "INSERT INTO worker_bucket_counts (queue, status, bucket, n) VALUES ({q}, {s}, {r}.id >> 14, {d}) "
    "ON CONFLICT (queue, status, bucket) DO UPDATE SET n = n + ({d});"
)
SQLITE_TRIGGERS = [
    "CREATE TRIGGER workers_bucket_counts_insert AFTER INSERT ON workers BEGIN "
    + SQLITE_BUMP.format(q="NEW.queue", s="NEW.status", r="NEW", d="1")
    + " END",
    "CREATE TRIGGER workers_bucket_counts_update AFTER UPDATE OF status, queue ON workers "
    "WHEN OLD.status IS NOT NEW.status OR OLD.queue IS NOT NEW.queue BEGIN "
    + SQLITE_BUMP.format(q="OLD.queue", s="OLD.status", r="OLD", d="-1")
    + " "
    + SQLITE_BUMP.format(q="NEW.queue", s="NEW.status", r="NEW", d="1")
    + " END",
    "CREATE TRIGGER workers_bucket_counts_delete AFTER DELETE ON workers BEGIN "
    + SQLITE_BUMP.format(q="OLD.queue", s="OLD.status", r="OLD", d="-1")
    + " END",
]
TRIGGER_NAMES = [
    "workers_bucket_counts_insert",
    "workers_bucket_counts_update",
    "workers_bucket_counts_delete",
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "worker_bucket_counts",
        sa.Column("queue", sa.String(length=50), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("queue", "status", "bucket", name=op.f("pk_worker_bucket_counts")),
    )
    if postgres:
        # No job may change between the count below and the triggers taking over (readers go on).
        op.execute("LOCK TABLE workers IN SHARE ROW EXCLUSIVE MODE")
    op.execute(
        "INSERT INTO worker_bucket_counts (queue, status, bucket, n) "
        "SELECT queue, status, id >> 14, count(*) FROM workers GROUP BY queue, status, id >> 14"
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
        op.execute("DROP FUNCTION IF EXISTS worker_bucket_counts_apply()")
    op.drop_table("worker_bucket_counts")
