"""read path indexes: the queued jobs in claim order, the list by finish time and by run time,
and trigram indexes for the free-text filter

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04

The queued jobs of a queue in claim order (priority, age, id) are a partial index of the AGENDADO
rows alone, on both databases: a job's place in its queue is ranked off it in order, without a
sort, and it stays as small as the backlog.

PostgreSQL only, the rest. The list sorted by FINISHED_AT or DURATION sorts by the column with
NULLs replaced by a value past every real one on the side the direction ends on (see
``resolvers.job_order``): one expression index per field and direction, on exactly the expression
the page sends, then the id, walked in order and entered at a cursor's (key, id); status and queue
ride along so the common filters are checked from the index.

The free-text filter ``q`` tests a job's context as folded text and its folded error message
with LIKE '%...%': trigram GIN indexes (``pg_trgm``) answer those, so a search reads the rows that
contain the text instead of every row. Creating the extension needs a role allowed to (a
superuser, or on PostgreSQL 13 and later the database's owner or a role with CREATE on it, as
``pg_trgm`` is a trusted extension). When it cannot be created the two trigram indexes are left
out and everything else is still created: ``q`` then answers as before, by reading every row,
and a later run of this revision's indexes by hand (``CREATE EXTENSION pg_trgm`` as a superuser,
then the two ``CREATE INDEX`` below) brings them.
"""

from __future__ import annotations

import logging

from alembic import op
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

QUEUED_INDEX = "ix_workers_queued_claim_order"
# The sort keys of resolvers.job_order, as the page statement writes them on PostgreSQL.
_FIRST_TIME = "CAST('-infinity' AS TIMESTAMP WITH TIME ZONE)"
_LAST_TIME = "CAST('9999-12-31 23:59:59+00:00' AS TIMESTAMP WITH TIME ZONE)"
_SECONDS = "CAST(EXTRACT(EPOCH FROM (data_fim - data_inicio)) AS DOUBLE PRECISION)"
ORDER_INDEXES = {
    "ix_workers_finished_desc": f"COALESCE(data_fim, {_FIRST_TIME})",
    "ix_workers_finished_asc": f"COALESCE(data_fim, {_LAST_TIME})",
    "ix_workers_duration_desc": f"COALESCE({_SECONDS}, CAST(-1e18 AS DOUBLE PRECISION))",
    "ix_workers_duration_asc": f"COALESCE({_SECONDS}, CAST(1e18 AS DOUBLE PRECISION))",
}
# models.folding's fold() on PostgreSQL, of the context's text and of the error message.
_ACCENTED = "áàâãäåéèêëíìîïóòôõöúùûüçñýÿ"
_PLAIN = "aaaaaaeeeeiiiiooooouuuucnyy"
TRIGRAM_INDEXES = {
    "ix_workers_context_trgm": f"translate(lower(CAST(context AS TEXT)), '{_ACCENTED}', '{_PLAIN}')",
    "ix_workers_error_trgm": f"translate(lower(mensagem_erro), '{_ACCENTED}', '{_PLAIN}')",
}


def _trigrams_available() -> bool:
    """Whether ``pg_trgm`` is (or could now be made) installed; a refusal is rolled back alone."""
    bind = op.get_bind()
    if bind.execute(text("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'")).first():
        return True
    try:
        with bind.begin_nested():
            bind.execute(text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
    except DBAPIError as error:  # refused (no privilege, not installed): the search stays as it was
        log.warning("pg_trgm unavailable (%s): the free-text filter keeps reading every row", error)
        return False
    return True


def upgrade() -> None:
    op.create_index(
        QUEUED_INDEX,
        "workers",
        ["queue", "priority", "created_at", "id"],
        postgresql_where=text("status = 'AGENDADO'"),
        sqlite_where=text("status = 'AGENDADO'"),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, key in ORDER_INDEXES.items():
        op.execute(f"CREATE INDEX {name} ON workers ({key}, id) INCLUDE (status, queue)")
    if _trigrams_available():
        for name, key in TRIGRAM_INDEXES.items():
            op.execute(f"CREATE INDEX {name} ON workers USING gin (({key}) gin_trgm_ops)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in (*TRIGRAM_INDEXES, *ORDER_INDEXES):
            op.execute(f"DROP INDEX IF EXISTS {name}")
    op.drop_index(QUEUED_INDEX, table_name="workers")
