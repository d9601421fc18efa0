"""machine presence

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


# Plain ALTER TABLE on both databases (SQLite has added and dropped columns in place since 3.35):
# a batch copy of the table would lose its CHECK constraint on SQLite, which does not reflect it.
def upgrade() -> None:
    op.add_column("machines", sa.Column("connected_since", sa.DateTime(timezone=True), nullable=True))
    op.add_column("machines", sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("machines", "last_seen_at")
    op.drop_column("machines", "connected_since")
