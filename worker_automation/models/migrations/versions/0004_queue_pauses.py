"""queue pauses

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_pauses",
        sa.Column("queue", sa.String(length=50), nullable=False),
        sa.Column("paused_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("paused_by", sa.String(length=120), nullable=True),
        sa.PrimaryKeyConstraint("queue", name=op.f("pk_queue_pauses")),
    )


def downgrade() -> None:
    op.drop_table("queue_pauses")
