"""time limit setting: an admin's override of an automation's timeout

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


# Null until an admin overrides it (the registry's limit); 0 is "no limit".
def upgrade() -> None:
    op.add_column("automation_settings", sa.Column("timeout_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("automation_settings", "timeout_seconds")
