"""Fixtures for tests that run the service as processes: a process set and a served stack."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import Processes, Stack, managed_processes, served_stack
from tests.integration.private_services import (
    PrivatePostgres,
    PrivateRedis,
    missing_binaries,
    private_postgres,
    private_redis,
)


@pytest.fixture
def processes(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Processes]:
    """Processes of this test, killed (whole groups) at teardown; logs printed if it failed."""
    with managed_processes(tmp_path / "logs", request.session) as procs:
        yield procs


@pytest.fixture
def stack(
    processes: Processes, pg_database_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[Stack]:
    """``worker-automation serve`` on a fresh PostgreSQL database and the suite's Redis, ready.

    Workers and machines are started by the test itself (``stack.pool_worker``, ``stack.machine``).
    """
    with served_stack(processes, pg_database_url, redis_url, redis_prefix, tmp_path) as built:
        yield built


def _require_server_binaries() -> None:
    """Skip (or fail under WA_REQUIRE_SERVICES=1) when redis-server or PostgreSQL is missing."""
    missing = missing_binaries()
    if not missing:
        return
    reason = f"not installed: {', '.join(missing)}"
    if os.environ.get("WA_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} and WA_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivatePostgres]:
    """A PostgreSQL cluster of this module's own (a test may stop it; the next one restarts it)."""
    _require_server_binaries()
    with private_postgres() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def private_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRedis]:
    """A ``redis-server`` of this module's own, without persistence."""
    _require_server_binaries()
    with private_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server


@pytest.fixture
def private_stack(
    processes: Processes,
    private_pg: PrivatePostgres,
    private_redis_server: PrivateRedis,
    redis_prefix: str,
    tmp_path: Path,
) -> Iterator[Stack]:
    """A :class:`Stack` on a fresh database of the private cluster and the private Redis (both
    running and Redis empty at the start), ``serve`` not started: the test sets its environment
    (``stack.env``) and starts it."""
    private_pg.start()
    private_redis_server.start()
    private_redis_server.flushall()
    database_url = private_pg.create_database(f"wa_fault_{uuid.uuid4().hex[:12]}")
    workdir = tmp_path / "work"
    workdir.mkdir()
    built = Stack(
        processes,
        database_url=database_url,
        redis_url=private_redis_server.url(),
        redis_prefix=redis_prefix,
        workdir=workdir,
    )
    try:
        yield built
    finally:
        processes.close()
        built.close()
