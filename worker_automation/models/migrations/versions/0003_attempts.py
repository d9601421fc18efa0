"""attempts: one row per claim, kept by triggers on workers

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# How a run that left EXECUTANDO ended: the job's terminal state, or back in the queue (a move,
# a recovery that queues it again).
OUTCOME = (
    "CASE WHEN {row}.status IN ('CONCLUIDO', 'FALHA', 'CANCELADO') THEN {row}.status ELSE 'REENFILEIRADO' END"
)
ERROR = "CASE WHEN {row}.status IN ('FALHA', 'CANCELADO') THEN {row}.mensagem_erro END"
NEXT_NUMBER = "COALESCE((SELECT max(a.number) FROM attempts a WHERE a.worker_id = NEW.id), 0) + 1"

# PostgreSQL: row triggers whose WHEN clause is checked without calling the function, so only the
# updates that really start or end a run pay for them (one index lookup and one write); the
# attempts of deleted jobs go in one statement per DELETE.
PG_FUNCTIONS = [
    f"""
CREATE OR REPLACE FUNCTION attempts_open() RETURNS trigger AS $$
BEGIN
  INSERT INTO attempts (worker_id, number, machine_id, task_id, started_at)
    VALUES (NEW.id, {NEXT_NUMBER}, NEW.machine_id, NEW.task_id, COALESCE(NEW.data_inicio, now()));
  RETURN NULL;
END
$$ LANGUAGE plpgsql
""",
    f"""
CREATE OR REPLACE FUNCTION attempts_close() RETURNS trigger AS $$
BEGIN
  UPDATE attempts SET ended_at = COALESCE(NEW.data_fim, NEW.updated_at, now()),
      outcome = {OUTCOME.format(row="NEW")}, error = {ERROR.format(row="NEW")}
    WHERE worker_id = NEW.id AND ended_at IS NULL;
  RETURN NULL;
END
$$ LANGUAGE plpgsql
""",
    """
CREATE OR REPLACE FUNCTION attempts_drop() RETURNS trigger AS $$
BEGIN
  DELETE FROM attempts WHERE worker_id IN (SELECT id FROM old_rows);
  RETURN NULL;
END
$$ LANGUAGE plpgsql
""",
]
PG_TRIGGERS = [
    "CREATE TRIGGER workers_attempt_open AFTER UPDATE OF status ON workers FOR EACH ROW "
    "WHEN (NEW.status = 'EXECUTANDO' AND OLD.status IS DISTINCT FROM 'EXECUTANDO') "
    "EXECUTE FUNCTION attempts_open()",
    "CREATE TRIGGER workers_attempt_close AFTER UPDATE OF status ON workers FOR EACH ROW "
    "WHEN (OLD.status = 'EXECUTANDO' AND NEW.status IS DISTINCT FROM 'EXECUTANDO') "
    "EXECUTE FUNCTION attempts_close()",
    "CREATE TRIGGER workers_attempt_drop AFTER DELETE ON workers "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION attempts_drop()",
]
PG_FUNCTION_NAMES = ["attempts_open", "attempts_close", "attempts_drop"]

SQLITE_TRIGGERS = [
    "CREATE TRIGGER workers_attempt_open AFTER UPDATE OF status ON workers "
    "WHEN NEW.status = 'EXECUTANDO' AND OLD.status IS NOT 'EXECUTANDO' BEGIN "
    "INSERT INTO attempts (worker_id, number, machine_id, task_id, started_at) VALUES "
    f"(NEW.id, {NEXT_NUMBER}, NEW.machine_id, NEW.task_id, COALESCE(NEW.data_inicio, NEW.updated_at)); "
    "END",
    "CREATE TRIGGER workers_attempt_close AFTER UPDATE OF status ON workers "
    "WHEN OLD.status = 'EXECUTANDO' AND NEW.status IS NOT 'EXECUTANDO' BEGIN "
    "UPDATE attempts SET ended_at = COALESCE(NEW.data_fim, NEW.updated_at), "
    f"outcome = {OUTCOME.format(row='NEW')}, error = {ERROR.format(row='NEW')} "
    "WHERE worker_id = NEW.id AND ended_at IS NULL; END",
    "CREATE TRIGGER workers_attempt_drop AFTER DELETE ON workers BEGIN "
    "DELETE FROM attempts WHERE worker_id = OLD.id; END",
]
TRIGGER_NAMES = ["workers_attempt_open", "workers_attempt_close", "workers_attempt_drop"]

# Jobs that already ran keep the one run their row tells about (its number counts the retries
# before it, whose details are gone).
BACKFILL = f"""
INSERT INTO attempts (worker_id, number, machine_id, task_id, started_at, ended_at, outcome, error)
SELECT id, retry_count + 1, machine_id, task_id, data_inicio,
       CASE WHEN status = 'EXECUTANDO' THEN NULL ELSE COALESCE(data_fim, updated_at) END,
       CASE WHEN status = 'EXECUTANDO' THEN NULL ELSE {OUTCOME.format(row="workers")} END,
       {ERROR.format(row="workers")}
FROM workers WHERE data_inicio IS NOT NULL
"""


def upgrade() -> None:
    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=True),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
    )
    op.create_index("ix_attempts_worker_number", "attempts", ["worker_id", "number"], unique=True)
    op.execute(BACKFILL)
    if op.get_bind().dialect.name == "postgresql":
        for function in PG_FUNCTIONS:
            op.execute(function)
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
        for name in PG_FUNCTION_NAMES:
            op.execute(f"DROP FUNCTION IF EXISTS {name}()")
    op.drop_index("ix_attempts_worker_number", table_name="attempts")
    op.drop_table("attempts")
