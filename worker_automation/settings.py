"""Service configuration, read once from the environment (prefix ``WA_``) and passed down."""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_QUEUES: dict[str, int] = {
    "certidao": 2,
    "scraping": 2,
    "scan": 1,
    "observer": 1,
    "ui_automation": 1,
}


def default_database_url() -> str:
    """A SQLite file in the working directory: every command run there shares it."""
    return f"sqlite+aiosqlite:///{Path.cwd() / 'worker_automation.db'}"


class Settings(BaseSettings):
    """Everything the service, its CLI and its worker processes can be told from outside."""

    model_config = SettingsConfigDict(env_prefix="WA_", extra="ignore")

    database_url: str = Field(default_factory=default_database_url)
    # Connections kept open per process (PostgreSQL), and how many more a burst may open; those
    # extra ones are closed again when returned, so a pool smaller than the usual concurrency
    # turns into a connect per request.
    database_pool_size: int = Field(default=30, ge=1)
    database_max_overflow: int = Field(default=10, ge=0)
    redis_url: str | None = None
    # Prefix of the event channel and of this service's own Redis keys (not Celery's queues).
    redis_prefix: str = "worker_automation"
    timezone: str = "America/Sao_Paulo"
    queues: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_QUEUES))
    shutdown_grace_seconds: float = 120.0
    api_url: str = "http://127.0.0.1:8000"
    worker_api_key: str | None = None
    # The operator key `worker-automation mcp` acts with (or its --api-key).
    api_key: str | None = None
    # A file holding the worker key (a mounted secret or a volume written at deployment): read
    # once at start-up when WA_WORKER_API_KEY itself is not given.
    worker_api_key_file: Path | None = None
    inspect_timeout_seconds: float = 3.0
    orphan_age_seconds: float = 7200.0
    # How soon after a fault a job nobody will run (its message lost, its process dead) is put
    # right by the reconciler; 0 turns the reconciler off.
    recovery_seconds: float = Field(default=60.0, ge=0)
    introspection: bool = True
    # A JSON manifest {id: document}: when given, GraphQL runs only those documents (by
    # documentId, by SHA-256 or by their exact text), GraphiQL's ad-hoc ones included.
    graphql_trusted_documents: Path | None = None
    max_query_depth: int = 10
    max_query_tokens: int = 2000
    max_query_aliases: int = 30
    # Hostile-input limits (see worker_automation.domain.limits for what each one guards).
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    max_context_bytes: int = Field(default=64 * 1024, ge=256)
    max_result_bytes: int = Field(default=1024 * 1024, ge=256)
    body_read_timeout_seconds: float = Field(default=30.0, gt=0)
    graphql_max_cost: int = Field(default=40_000, ge=1)
    graphql_max_response_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    # Websocket budgets: operations one socket may have in flight, and authenticated sockets one
    # key (operator or machine) may hold open in one process; answer bytes in flight count against
    # graphql_max_response_bytes per socket and per key.
    ws_max_operations: int = Field(default=20, ge=1)
    ws_max_sockets_per_key: int = Field(default=50, ge=1)
    # Where the embedded broker listens when no WA_REDIS_URL is given (0 = any free port).
    embedded_broker_port: int = 0
    # Start Celery pool workers with the embedded `serve` (turned off by tests that bring their own).
    embedded_workers: bool = True
    # Log lines as text for people or one JSON object per line for log collectors.
    log_format: Literal["text", "json"] = "text"
    # Browser origins allowed to call the API (HTTP CORS and websocket handshakes alike): a
    # comma-separated list or a JSON list; none by default (same-origin pages and non-browser
    # clients need nothing).
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Finished jobs (CONCLUIDO, FALHA, CANCELADO) older than this many days are deleted, with their
    # attempts, by the periodic housekeeping of `serve`; 0 keeps everything.
    retention_days: int = Field(default=90, ge=0)
    # Celery task events (task-sent from the API, received/started/succeeded from pool workers)
    # for a monitor such as Flower. The service's own live views come from its event bus and the
    # job rows, so they are off unless asked for: they cost each job a few Redis publishes.
    task_events: bool = False
    # A pool worker started by an embedded `serve` gets serve's pid here: it ends when serve does.
    exit_with_parent: int | None = None
    # A pool worker keeps no pool process while it has no job, and forks them as jobs arrive (up
    # to its queue's count): an embedded `serve` sets it, so that an idle one holds little memory.
    pool_on_demand: bool = False

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        """Accept plain URLs and pick the async driver this service runs on."""
        if value.startswith("postgresql://") or value.startswith("postgres://"):
            return "postgresql+asyncpg://" + value.split("://", 1)[1]
        if value.startswith("sqlite://") and not value.startswith("sqlite+aiosqlite://"):
            return "sqlite+aiosqlite://" + value.split("://", 1)[1]
        return value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _origin_list(cls, value: Any) -> Any:
        """``https://a.example,https://b.example`` or ``["https://a.example"]``; no trailing slash."""
        if isinstance(value, str):
            text = value.strip()
            items = json.loads(text) if text.startswith("[") else text.split(",")
            if not isinstance(items, list):
                raise ValueError("WA_CORS_ORIGINS must be a list of origins")
            value = items
        if isinstance(value, list):
            return [str(item).strip().rstrip("/") for item in value if str(item).strip()]
        return value

    @model_validator(mode="after")
    def _key_from_file(self) -> Settings:
        if self.worker_api_key is None and self.worker_api_key_file is not None:
            try:
                key = self.worker_api_key_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ValueError(f"WA_WORKER_API_KEY_FILE cannot be read: {exc}") from exc
            self.worker_api_key = key or None
        return self

    @field_validator("queues")
    @classmethod
    def _positive_workers(cls, value: dict[str, int]) -> dict[str, int]:
        if not value:
            raise ValueError("at least one queue must be configured")
        for name, count in value.items():
            if count < 1:
                raise ValueError(f"queue {name!r} needs at least one worker")
        return value

    @cached_property
    def tz(self) -> ZoneInfo:
        """The zone timestamps are shown in and "today" is counted in."""
        return ZoneInfo(self.timezone)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")
