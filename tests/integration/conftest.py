"""Fixtures for tests that run the service as processes: a process set and a served stack."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import Processes, Stack, managed_processes, served_stack


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
