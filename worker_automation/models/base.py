"""Declarative base and the column types every table shares."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, MetaData
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

# Stable constraint names, so migrations are the same on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# JSONB on PostgreSQL (indexable, compact), plain JSON text elsewhere.
JSONType = JSON().with_variant(JSONB(), "postgresql")


def on_asyncpg(dialect: Dialect) -> bool:
    """Whether ``dialect`` is PostgreSQL through asyncpg (the production driver)."""
    return dialect.name == "postgresql" and dialect.driver == "asyncpg"


class UtcDateTime(TypeDecorator[datetime]):
    """Stores instants in UTC and always returns timezone-aware values.

    SQLite keeps no offset, so values come back naive; they are UTC by construction.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored; pass an aware one")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        # asyncpg already returns timestamptz values aware and in UTC: no call per value (lists
        # and live views read four timestamps a row).
        if on_asyncpg(dialect):
            return None
        return super().result_processor(dialect, coltype)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment: datetime = datetime.fromisoformat(value) if isinstance(value, str) else value
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)


def utcnow() -> datetime:
    """The current instant, aware, in UTC."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Base of every table of the service."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
