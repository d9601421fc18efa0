"""automation rollups: finished jobs per automation, queue and quarter hour, kept by triggers

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

# The run-time buckets' upper bounds in milliseconds (the model's ``DURATION_BOUNDS_MS``).
BOUNDS = (
    20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1_100, 1_700, 2_500, 3_800, 5_750, 8_500,
    13_000, 20_000, 30_000, 45_000, 65_000, 100_000, 150_000, 225_000, 335_000, 500_000,
    750_000, 1_100_000, 1_700_000, 2_500_000, 3_800_000, 5_750_000, 8_500_000, 13_000_000,
    20_000_000, 30_000_000, 45_000_000, 65_000_000,
)  # fmt: skip
HISTOGRAM = [f"d{i:02d}" for i in range(len(BOUNDS) + 1)]
COUNTS = ["completed", "failed", "cancelled"]
KEY = ["automation_type", "slot", "queue"]
COLUMNS = KEY + COUNTS + HISTOGRAM
ENDED = "('CONCLUIDO', 'FALHA', 'CANCELADO')"
TRIGGER_NAMES = ["automation_rollups_insert", "automation_rollups_update"]


def _bucket(ms: str, postgres: bool) -> str:
    """The histogram bucket of a run of ``ms`` milliseconds: how many bounds it reaches."""
    if postgres:
        return f"width_bucket({ms}, ARRAY{list(BOUNDS)}::double precision[])"
    steps = " ".join(f"WHEN {ms} < {bound} THEN {i}" for i, bound in enumerate(BOUNDS))
    return f"CASE {steps} ELSE {len(BOUNDS)} END"


def _measured(row: str, slot: str, ms: str, postgres: bool) -> str:
    """The columns of one finished row: key, status, bucket (-1: cancelled or never started)."""
    bucket = _bucket(ms, postgres)
    return (
        f"{row}.automation_type AS automation_type, {slot} AS slot, {row}.queue AS queue, "
        f"{row}.status AS status, CASE WHEN {row}.status = 'CANCELADO' OR {row}.data_inicio IS NULL "
        f"THEN -1 ELSE {bucket} END AS bucket"
    )


def _pivot(changes: str, fence: str = "") -> str:
    """One row per key from ``changes`` (key, status, bucket, d): d summed into each column.
    ``fence`` keeps the planner from inlining ``changes``, which would compute a row's bucket once
    per column instead of once."""
    counts = [
        f"sum(CASE WHEN status = '{status}' THEN d ELSE 0 END)"
        for status in ("CONCLUIDO", "FALHA", "CANCELADO")
    ]
    histogram = [f"sum(CASE WHEN bucket = {i} THEN d ELSE 0 END)" for i in range(len(HISTOGRAM))]
    sums = ", ".join(counts + histogram)
    return (
        f"SELECT automation_type, slot, queue, {sums} FROM ({changes}{fence}) AS changes "
        "GROUP BY automation_type, slot, queue"
    )


def _upsert(table: str) -> str:
    return ", ".join(f"{c} = {table}{c} + EXCLUDED.{c}" for c in COUNTS + HISTOGRAM)


# PostgreSQL: timestamps are timestamptz.
PG_FENCE = " OFFSET 0"
PG_SLOT = "floor(date_part('epoch', {r}.data_fim) / 900)::integer"
PG_MS = "date_part('epoch', {r}.data_fim - {r}.data_inicio) * 1000"


def _ended_rows(r: str, slot: str, ms: str, d: int, *, source: bool = True, postgres: bool = False) -> str:
    """Each finished row of ``r`` (a table; or, without ``source``, a trigger's NEW or OLD) with
    its sign ``d``. The WHERE also tells SQLite's parser that an upsert's ON CONFLICT is not a join's."""
    found = f" FROM {r}" if source else ""
    return (
        f"SELECT {_measured(r, slot.format(r=r), ms.format(r=r), postgres)}, {d} AS d{found} "
        f"WHERE {r}.status IN {ENDED} AND {r}.data_fim IS NOT NULL"
    )


def _pg_rows(table: str, d: int) -> str:
    return _ended_rows(table, PG_SLOT, PG_MS, d, postgres=True)


def _pg_apply(changes: str) -> str:
    return (
        f"INSERT INTO automation_rollups AS r ({', '.join(COLUMNS)}) {_pivot(changes, PG_FENCE)} "
        f"ORDER BY automation_type, slot, queue ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET {_upsert('r.')};"
    )


# A row's old contribution and its new one cancel out unless something counted changed.
PG_NET = (
    "SELECT automation_type, slot, queue, status, bucket, sum(d) AS d FROM ("
    + _pg_rows("new_rows", 1)
    + " UNION ALL "
    + _pg_rows("old_rows", -1)
    + ") AS both_sides GROUP BY automation_type, slot, queue, status, bucket HAVING sum(d) <> 0"
)
PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION automation_rollups_apply() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    {_pg_apply(_pg_rows("new_rows", 1))}
  ELSE
    {_pg_apply(PG_NET)}
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
"""
# Deleting a job (retention, a prune) leaves its counts: there is no DELETE trigger.
PG_TRIGGERS = [
    "CREATE TRIGGER automation_rollups_insert AFTER INSERT ON workers "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION automation_rollups_apply()",
    "CREATE TRIGGER automation_rollups_update AFTER UPDATE ON workers "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION automation_rollups_apply()",
]

# SQLite: timestamps are UTC text (``YYYY-MM-DD HH:MM:SS.ffffff``); row triggers.
SQLITE_SLOT = "CAST(strftime('%s', substr({r}.data_fim, 1, 19)) AS INTEGER) / 900"
SQLITE_MS = "(julianday({r}.data_fim) - julianday({r}.data_inicio)) * 86400000.0"


def _sqlite_bump(r: str, d: int) -> str:
    changes = _ended_rows(r, SQLITE_SLOT, SQLITE_MS, d, source=False)
    return (
        f"INSERT INTO automation_rollups ({', '.join(COLUMNS)}) {_pivot(changes)} "
        f"ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET {_upsert('')};"
    )


SQLITE_TRIGGERS = [
    f"CREATE TRIGGER automation_rollups_insert AFTER INSERT ON workers "
    f"WHEN NEW.status IN {ENDED} BEGIN {_sqlite_bump('NEW', 1)} END",
    "CREATE TRIGGER automation_rollups_update AFTER UPDATE OF status, data_fim, data_inicio, "
    f"automation_type, queue ON workers WHEN OLD.status IN {ENDED} OR NEW.status IN {ENDED} BEGIN "
    f"{_sqlite_bump('OLD', -1)} {_sqlite_bump('NEW', 1)} END",
]


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        "automation_rollups",
        sa.Column("automation_type", sa.String(length=100), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(length=50), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in COUNTS + HISTOGRAM),
        sa.PrimaryKeyConstraint(*KEY, name=op.f("pk_automation_rollups")),
    )
    op.create_index("ix_automation_rollups_slot", "automation_rollups", ["slot"])
    if postgres:
        # No job may finish between the count below and the triggers taking over (readers go on).
        op.execute("LOCK TABLE workers IN SHARE ROW EXCLUSIVE MODE")
        existing = _pg_rows("workers", 1)
    else:
        existing = _ended_rows("workers", SQLITE_SLOT, SQLITE_MS, 1)
    fence = PG_FENCE if postgres else " LIMIT -1 OFFSET 0"
    op.execute(f"INSERT INTO automation_rollups ({', '.join(COLUMNS)}) {_pivot(existing, fence)}")
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
        op.execute("DROP FUNCTION IF EXISTS automation_rollups_apply()")
    op.drop_index("ix_automation_rollups_slot", table_name="automation_rollups")
    op.drop_table("automation_rollups")
