"""the rollups' trigger returns at once from a statement that finishes no job and unfinishes none

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05

Every statement on ``workers`` runs each statement-level trigger, which aggregates its transition
tables and upserts the result even when no row passes its filter. The automation rollups (0010,
0014) count finished rows only, yet a job's insert and its claim ran both of their pivots (45
columns each, the costliest of the counting triggers). Their function now first asks whether any
row of the statement, before or after it, is a finished one, and returns when none is. That is
the filter the pivots already apply to every row, so what they write is unchanged. The cheaper
counters (queue positions, finish hours) gained nothing measurable from the same test and are
left as they are (see docs/decisions/0037-rollups-skip-unfinished-statements.md). Row triggers
(SQLite) already test this in their WHEN.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def _revision(name: str) -> ModuleType:
    return importlib.import_module(f"worker_automation.models.migrations.versions.{name}")


def _rollups_function() -> tuple[str, str]:
    """The rollups' function as 0014 last wrote it, and the filter of the rows it counts."""
    quarter_hours = _revision("0010_automation_rollups")
    days = _revision("0014_daily_rollups")
    return days._pg_functions(quarter_hours), f"status IN {quarter_hours.ENDED} AND data_fim IS NOT NULL"


def _guarded(function: str, counted: str) -> str:
    """``function`` (its body starting with ``BEGIN``; called by INSERT and UPDATE triggers only)
    first returning when no row of the statement's transition tables passes ``counted``."""
    none_new = f"NOT EXISTS (SELECT 1 FROM new_rows WHERE {counted})"
    none_old = f"NOT EXISTS (SELECT 1 FROM old_rows WHERE {counted})"
    skip = (
        f"  IF TG_OP = 'INSERT' THEN\n    IF {none_new} THEN RETURN NULL; END IF;\n"
        f"  ELSIF {none_new} AND {none_old} THEN\n    RETURN NULL;\n  END IF;\n"
    )
    head, begin, body = function.partition("$$\nBEGIN\n")
    if not begin:
        raise ValueError("the rollups' function must start its body with BEGIN on its own line")
    return f"{head}{begin}{skip}{body}"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_guarded(*_rollups_function()))


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(_rollups_function()[0])
