"""Fixtures for tests that run the service as processes: a process set and a served stack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import Processes, Stack, managed_processes


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
    workdir = tmp_path / "work"
    workdir.mkdir()
    built = Stack(
        processes,
        database_url=pg_database_url,
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        workdir=workdir,
    )
    try:
        built.serve()
        yield built
    finally:
        # Before the database is dropped and Redis flushed (those fixtures end after this one).
        processes.close()
        built.close()
