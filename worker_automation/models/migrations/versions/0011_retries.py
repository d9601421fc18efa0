"""automatic retries

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both databases, as in 0009. The settings columns are null until an admin
# overrides them: null reads as the registry's default.
def upgrade() -> None:
    op.add_column("workers", sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("automation_settings", sa.Column("max_attempts", sa.Integer(), nullable=True))
    op.add_column("automation_settings", sa.Column("retry_backoff_seconds", sa.Integer(), nullable=True))
    op.add_column("automation_settings", sa.Column("retry_backoff_max_seconds", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("automation_settings", "retry_backoff_max_seconds")
    op.drop_column("automation_settings", "retry_backoff_seconds")
    op.drop_column("automation_settings", "max_attempts")
    op.drop_column("workers", "next_attempt_at")
