"""list order indexes: jobs by creation time and by priority, each then by id

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


# The job list sorted by CREATED_AT or PRIORITY reads its page off one of these in either
# direction (and after a cursor enters it at the cursor's (key, id)) instead of sorting the table.
def upgrade() -> None:
    op.create_index("ix_workers_created_at_id", "workers", ["created_at", "id"], unique=False)
    op.create_index("ix_workers_priority_id", "workers", ["priority", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_workers_priority_id", table_name="workers")
    op.drop_index("ix_workers_created_at_id", table_name="workers")
