"""The ``workers`` table: one row per execution of an automation, and its states."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import BigInteger, ColumnElement, Index, Integer, String, Text, literal_column, text
from sqlalchemy.orm import Mapped, mapped_column

from worker_automation.domain.vocabulary import JobStatus
from worker_automation.models.base import Base, JSONType, UtcDateTime, utcnow

# How a job's state reads in Celery's vocabulary (for /status/{task_id}).
CELERY_STATE: dict[JobStatus, str] = {
    JobStatus.AGENDADO: "PENDING",
    JobStatus.EXECUTANDO: "STARTED",
    JobStatus.CONCLUIDO: "SUCCESS",
    JobStatus.FALHA: "FAILURE",
    JobStatus.CANCELADO: "REVOKED",
}


class Job(Base):
    """A job row ("worker" in the REST API). ``cliente_id`` is deliberately not a foreign key."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str | None] = mapped_column(String(64), unique=True)
    cliente_id: Mapped[int | None] = mapped_column(Integer)
    usuario_id: Mapped[int | None] = mapped_column(Integer)
    path_file: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default=JobStatus.AGENDADO.value)
    data_inicio: Mapped[datetime | None] = mapped_column(UtcDateTime)
    data_fim: Mapped[datetime | None] = mapped_column(UtcDateTime)
    mensagem_erro: Mapped[str | None] = mapped_column(Text)
    automation_type: Mapped[str] = mapped_column(String(100))
    queue: Mapped[str] = mapped_column(String(50))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    retry_count: Mapped[int] = mapped_column(Integer, default=0)
    progress: Mapped[int] = mapped_column(Integer, default=0)
    metadata_json: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    context: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    result: Mapped[Any | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)
    machine_id: Mapped[int | None] = mapped_column(Integer)
    # An automatic retry waiting for its backoff: no claim before it (null: no wait).
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    __table_args__ = (
        # The queued view: AGENDADO ordered by priority, then age.
        Index("ix_workers_status_priority_created", "status", "priority", "created_at", "id"),
        # A queued job's place in its queue: the backlog of each queue in claim order, ranked off
        # the index in order (see resolvers.waiting). PostgreSQL has more: see below.
        Index(
            "ix_workers_queued_claim_order",
            "queue",
            "priority",
            "created_at",
            "id",
            postgresql_where=text("status = 'AGENDADO'"),
            sqlite_where=text("status = 'AGENDADO'"),
        ),
        # List filters (status and/or queue, newest first) and per-queue/status stats.
        Index("ix_workers_status_queue_id", "status", "queue", "id"),
        Index("ix_workers_queue_id", "queue", "id"),
        # Claims count running jobs per automation; the automation filter.
        Index("ix_workers_automation_status", "automation_type", "status"),
        Index("ix_workers_cliente_id", "cliente_id"),
        # The job list sorted by creation time or by priority (see resolvers.job_order).
        Index("ix_workers_created_at_id", "created_at", "id"),
        Index("ix_workers_priority_id", "priority", "id"),
        Index("ix_workers_usuario_id", "usuario_id"),
        # "Today" counts and the history of terminal rows.
        Index("ix_workers_status_data_fim", "status", "data_fim"),
        # History (throughput, durations) and retention: rows by finish time, answered from the
        # index alone on PostgreSQL (the other columns those reads use ride along).
        Index(
            "ix_workers_history",
            "data_fim",
            postgresql_include=["status", "queue", "automation_type", "data_inicio"],
        ),
        Index(
            "ix_workers_automation_history",
            "automation_type",
            "data_fim",
            postgresql_include=["status", "queue", "data_inicio"],
        ),
    )


def row_status_is(status: JobStatus) -> ColumnElement[bool]:
    """Whether the row a statement found by its key has ``status``, written so that no index can
    serve it.

    A statement that finds a job by its key (a claim, a completion, a retry's send) and tests its
    status leaves PostgreSQL's planner a choice while the table has no statistics yet (a new
    database, until its first ANALYZE): an index that leads with ``status`` then looks as cheap as
    the key's, and it may pick one, reading every queued (or finished) job's index entry, a cost
    that grows with the table. As an expression, the status only filters the row the key found.
    """
    return Job.status.concat(literal_column("''")) == status.value


# Indexes of ``workers`` that PostgreSQL alone has, made by their migration and not declared
# above: expressions (the list's orders by finish time and by run time, as the page statement
# writes them) and trigram indexes for the free-text filter, when ``pg_trgm`` could be installed.
# A comparison of the models with a migrated database leaves them out.
POSTGRESQL_ONLY_INDEXES: Final = frozenset(
    {
        "ix_workers_finished_desc",
        "ix_workers_finished_asc",
        "ix_workers_duration_desc",
        "ix_workers_duration_asc",
        "ix_workers_context_trgm",
        "ix_workers_error_trgm",
    }
)


class JobCount(Base):
    """Rows per (queue, status), kept exact by database triggers on ``workers``.

    Aggregates over a million rows cannot answer in milliseconds by scanning; these counters
    change in the same transaction as the rows they count, whoever writes them.
    """

    __tablename__ = "worker_counts"

    queue: Mapped[str] = mapped_column(String(50), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class QueuedCount(Base):
    """Queued (AGENDADO) rows per (queue, priority), kept exact by database triggers on
    ``workers`` like :class:`JobCount`: the jobs of smaller priorities that come before a queued
    job in its queue, without counting them (see :mod:`worker_automation.resolvers.waiting`)."""

    __tablename__ = "queued_counts"

    queue: Mapped[str] = mapped_column(String(50), primary_key=True)
    priority: Mapped[int] = mapped_column(Integer, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class FinishedCount(Base):
    """Rows that finished per hour of ``data_fim`` (``slot``: epoch seconds // 3600), queue
    and status, kept exact by database triggers on ``workers`` like :class:`JobCount`: the total
    of a list bounded by finish time without counting its rows (see
    :func:`worker_automation.resolvers.counts.finished_total`)."""

    __tablename__ = "finished_counts"

    slot: Mapped[int] = mapped_column(Integer, primary_key=True)
    queue: Mapped[str] = mapped_column(String(50), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


# Ids per bucket of ``worker_bucket_counts`` (a power of two: the bucket of an id is ``id >> 14``).
BUCKET_BITS = 14
BUCKET_IDS = 1 << BUCKET_BITS


class JobBucketCount(Base):
    """Rows per (queue, status) and bucket of consecutive ids, kept exact by database triggers
    on ``workers`` like :class:`JobCount`.

    A deep page of a list newest first (by id) is found without skipping every entry before it:
    the counts of the buckets above give the bucket the page starts in and how many of its own
    entries to skip (see :func:`worker_automation.resolvers.counts.bucketed_seek`).
    """

    __tablename__ = "worker_bucket_counts"

    queue: Mapped[str] = mapped_column(String(50), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), primary_key=True)
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)
