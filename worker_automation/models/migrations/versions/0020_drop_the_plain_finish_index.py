"""``ix_workers_data_fim`` dropped: ``ix_workers_history`` has the same key

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-06

``ix_workers_history`` (0005) is ``data_fim`` with the columns the history reads carried beside
it, so every statement the plain index served it serves too, from the index alone. The plain
one only cost writes: an entry for each of a job's row versions (its insert, its claim and its
end), since updates of ``workers`` change indexed columns and are never HOT.
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_workers_data_fim", table_name="workers")


def downgrade() -> None:
    op.create_index("ix_workers_data_fim", "workers", ["data_fim"], unique=False)
