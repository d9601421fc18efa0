"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.String(length=255), nullable=False),
        sa.Column("perfil", sa.String(length=20), nullable=False),
        sa.Column("usuario_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=120), nullable=False),
        sa.Column("perfil", sa.String(length=20), nullable=True),
        sa.Column("action", sa.String(length=60), nullable=False),
        sa.Column("target", sa.String(length=120), nullable=True),
        sa.Column("result", sa.String(length=20), nullable=False),
        sa.Column(
            "detail",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"], unique=False)
    op.create_table(
        "automation_settings",
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("max_concurrent_jobs", sa.Integer(), nullable=False),
        sa.Column("dev_mode", sa.Boolean(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(length=120), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_automation_settings")),
    )
    op.create_table(
        "clientes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("razao_social", sa.String(length=255), nullable=False),
        sa.Column("cnpj", sa.String(length=14), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_clientes")),
        sa.UniqueConstraint("cnpj", name=op.f("uq_clientes_cnpj")),
    )
    op.create_table(
        "machines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=120), nullable=False),
        sa.Column("automation", sa.String(length=100), nullable=True),
        sa.Column("queue", sa.String(length=50), nullable=True),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("key_prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_claim_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(automation IS NULL) <> (queue IS NULL)", name=op.f("ck_machines_serves_one_automation_or_queue")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_machines")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_machines_key_hash")),
        sa.UniqueConstraint("name", name=op.f("uq_machines_name")),
    )
    op.create_table(
        "usuarios",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("nome", sa.String(length=255), nullable=False),
        sa.Column("perfil", sa.String(length=20), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usuarios")),
    )
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.Column("cliente_id", sa.Integer(), nullable=True),
        sa.Column("usuario_id", sa.Integer(), nullable=True),
        sa.Column("path_file", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("data_inicio", sa.DateTime(timezone=True), nullable=True),
        sa.Column("data_fim", sa.DateTime(timezone=True), nullable=True),
        sa.Column("mensagem_erro", sa.Text(), nullable=True),
        sa.Column("automation_type", sa.String(length=100), nullable=False),
        sa.Column("queue", sa.String(length=50), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("retry_count", sa.Integer(), nullable=False),
        sa.Column("progress", sa.Integer(), nullable=False),
        sa.Column(
            "metadata_json",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "context",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "result",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("machine_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
        sa.UniqueConstraint("task_id", name=op.f("uq_workers_task_id")),
    )
    op.create_index("ix_workers_automation_status", "workers", ["automation_type", "status"], unique=False)
    op.create_index("ix_workers_cliente_id", "workers", ["cliente_id"], unique=False)
    op.create_index("ix_workers_data_fim", "workers", ["data_fim"], unique=False)
    op.create_index("ix_workers_queue_id", "workers", ["queue", "id"], unique=False)
    op.create_index("ix_workers_status_data_fim", "workers", ["status", "data_fim"], unique=False)
    op.create_index(
        "ix_workers_status_priority_created",
        "workers",
        ["status", "priority", "created_at", "id"],
        unique=False,
    )
    op.create_index("ix_workers_status_queue_id", "workers", ["status", "queue", "id"], unique=False)
    op.create_index("ix_workers_usuario_id", "workers", ["usuario_id"], unique=False)


def downgrade() -> None:

    op.drop_index("ix_workers_usuario_id", table_name="workers")
    op.drop_index("ix_workers_status_queue_id", table_name="workers")
    op.drop_index("ix_workers_status_priority_created", table_name="workers")
    op.drop_index("ix_workers_status_data_fim", table_name="workers")
    op.drop_index("ix_workers_queue_id", table_name="workers")
    op.drop_index("ix_workers_data_fim", table_name="workers")
    op.drop_index("ix_workers_cliente_id", table_name="workers")
    op.drop_index("ix_workers_automation_status", table_name="workers")
    op.drop_table("workers")
    op.drop_table("usuarios")
    op.drop_table("machines")
    op.drop_table("clientes")
    op.drop_table("automation_settings")
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_table("api_keys")
