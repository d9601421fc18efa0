"""history indexes: finished rows by time (throughput, durations), audit log by action

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_workers_history",
        "workers",
        ["data_fim"],
        unique=False,
        postgresql_include=["status", "queue", "automation_type", "data_inicio"],
    )
    op.create_index(
        "ix_workers_automation_history",
        "workers",
        ["automation_type", "data_fim"],
        unique=False,
        postgresql_include=["status", "queue", "data_inicio"],
    )
    op.create_index("ix_audit_log_action_id", "audit_log", ["action", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_audit_log_action_id", table_name="audit_log")
    op.drop_index("ix_workers_automation_history", table_name="workers")
    op.drop_index("ix_workers_history", table_name="workers")
