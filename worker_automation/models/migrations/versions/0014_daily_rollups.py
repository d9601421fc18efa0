"""daily rollups: finished jobs per automation, queue and UTC day, kept by the same triggers

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04

Throughput over months read ninety days of quarter hours (tens of thousands of rows at a million
jobs). ``automation_rollups_daily`` holds the same counts and histograms per UTC day (``slot //
96``): the triggers that keep the quarter hours write a job's contribution to its day in the same
statement's transaction, and move it when the job changes. Like the quarter hours, a deleted job
(retention) keeps its counts. A day of a zone that is not UTC is read as its UTC days corrected by
the quarter hours between the two midnights (see ``resolvers.rollup_reads``).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

TABLE = "automation_rollups_daily"
INDEX = "ix_automation_rollups_daily_day"
# Quarter hours per UTC day.
DAY_SLOTS = 96


def _quarter_hours() -> ModuleType:
    """The revision that made the quarter-hour rollups and their triggers (0010): its statement
    builders make the daily ones, so both count a job alike."""
    return importlib.import_module("worker_automation.models.migrations.versions.0010_automation_rollups")


def _daily_columns(rollups: ModuleType) -> list[str]:
    return ["automation_type", "day", "queue", *rollups.COUNTS, *rollups.HISTOGRAM]


def _pg_functions(rollups: ModuleType) -> str:
    """The trigger function of 0010, writing each change into the days too."""

    def apply_days(changes: str) -> str:
        by_day = (
            f"SELECT automation_type, slot / {DAY_SLOTS} AS slot, queue, status, bucket, d "
            f"FROM ({changes}) AS by_slot"
        )
        return (
            f"INSERT INTO {TABLE} AS r ({', '.join(_daily_columns(rollups))}) "
            f"{rollups._pivot(by_day, rollups.PG_FENCE)} ORDER BY automation_type, slot, queue "
            f"ON CONFLICT (automation_type, day, queue) DO UPDATE SET {rollups._upsert('r.')};"
        )

    inserted = rollups._pg_rows("new_rows", 1)
    return f"""
CREATE OR REPLACE FUNCTION automation_rollups_apply() RETURNS trigger AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    {rollups._pg_apply(inserted)}
    {apply_days(inserted)}
  ELSE
    {rollups._pg_apply(rollups.PG_NET)}
    {apply_days(rollups.PG_NET)}
  END IF;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
"""


def _sqlite_triggers(rollups: ModuleType) -> list[str]:
    """The row triggers of 0010, each bumping the job's day after its quarter hour."""
    day_slot = f"(({rollups.SQLITE_SLOT}) / {DAY_SLOTS})"

    def bump(r: str, d: int) -> str:
        quarter = rollups._sqlite_bump(r, d)
        changes = rollups._ended_rows(r, day_slot, rollups.SQLITE_MS, d, source=False)
        daily = (
            f"INSERT INTO {TABLE} ({', '.join(_daily_columns(rollups))}) {rollups._pivot(changes)} "
            f"ON CONFLICT (automation_type, day, queue) DO UPDATE SET {rollups._upsert('')};"
        )
        return f"{quarter} {daily}"

    return [
        "CREATE TRIGGER automation_rollups_insert AFTER INSERT ON workers "
        f"WHEN NEW.status IN {rollups.ENDED} BEGIN {bump('NEW', 1)} END",
        "CREATE TRIGGER automation_rollups_update AFTER UPDATE OF status, data_fim, data_inicio, "
        f"automation_type, queue ON workers WHEN OLD.status IN {rollups.ENDED} OR NEW.status IN "
        f"{rollups.ENDED} BEGIN {bump('OLD', -1)} {bump('NEW', 1)} END",
    ]


def upgrade() -> None:
    rollups = _quarter_hours()
    postgres = op.get_bind().dialect.name == "postgresql"
    op.create_table(
        TABLE,
        sa.Column("automation_type", sa.String(length=100), nullable=False),
        sa.Column("day", sa.Integer(), nullable=False),
        sa.Column("queue", sa.String(length=50), nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in rollups.COUNTS + rollups.HISTOGRAM),
        sa.PrimaryKeyConstraint("automation_type", "day", "queue", name=op.f(f"pk_{TABLE}")),
    )
    op.create_index(INDEX, TABLE, ["day"])
    if postgres:
        # No job may finish between the sums below and the triggers writing the days too.
        op.execute("LOCK TABLE workers IN SHARE ROW EXCLUSIVE MODE")
    sums = ", ".join(f"sum({c})" for c in rollups.COUNTS + rollups.HISTOGRAM)
    op.execute(
        f"INSERT INTO {TABLE} ({', '.join(_daily_columns(rollups))}) "
        f"SELECT automation_type, slot / {DAY_SLOTS}, queue, {sums} FROM automation_rollups "
        f"GROUP BY automation_type, slot / {DAY_SLOTS}, queue"
    )
    if postgres:
        op.execute(_pg_functions(rollups))
        return
    for name in rollups.TRIGGER_NAMES:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    for statement in _sqlite_triggers(rollups):
        op.execute(statement)


def downgrade() -> None:
    rollups = _quarter_hours()
    if op.get_bind().dialect.name == "postgresql":
        op.execute(rollups.PG_FUNCTION)
    else:
        for name in rollups.TRIGGER_NAMES:
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        for statement in rollups.SQLITE_TRIGGERS:
            op.execute(statement)
    op.drop_index(INDEX, table_name=TABLE)
    op.drop_table(TABLE)
