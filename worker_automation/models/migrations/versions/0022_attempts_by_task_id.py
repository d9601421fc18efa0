"""attempts by task id: the state of a task its job no longer holds

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07

A job's row keeps only its newest task id; a caller polling an older one (a run that failed
before a retry, one moved or sent again) is answered from the attempt that ran under it
(``resolvers.earlier_tasks``). This index finds it without reading the table.
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_attempts_task_id", "attempts", ["task_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_attempts_task_id", table_name="attempts")
