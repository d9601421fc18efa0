"""audit log by target: a job's entries, newest first

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_audit_log_target_id", "audit_log", ["target", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_audit_log_target_id", table_name="audit_log")
