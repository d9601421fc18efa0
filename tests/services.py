"""Where the real PostgreSQL and Redis are, and what to do when one is missing.

With ``WA_REQUIRE_SERVICES=1`` (as in CI) a missing service fails the test; otherwise the test is
skipped with a reason naming the service.
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import IO

import pytest

PG_HOST = os.environ.get("WA_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("WA_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("WA_TEST_PG_USER", "postgres")
REDIS_HOST = os.environ.get("WA_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("WA_TEST_REDIS_PORT", "6379"))
# The Redis databases a run of this suite may own (the benchmarks use 12; others on the machine
# are left alone).
REDIS_TEST_DBS = (13, 14, 15, 11, 10, 9)
REDIS_DB_ENV = "WA_TEST_REDIS_DB"
# Which process of the run chose ``WA_TEST_REDIS_DB``: the pytest-xdist worker's name, empty for a
# run without workers. Each worker of ``pytest -n`` owns a database of its own.
REDIS_DB_CHOOSER_ENV = "WA_TEST_REDIS_DB_CHOOSER"
XDIST_WORKER_ENV = "PYTEST_XDIST_WORKER"
_held_locks: list[IO[str]] = []


def _lock_path(db: int) -> Path:
    return Path(tempfile.gettempdir()) / f"wa-tests-redis-{REDIS_HOST}-{REDIS_PORT}-db{db}.lock"


def owned_redis_db() -> int:
    """The Redis database this run (or this worker of ``pytest -n``) owns and empties around its
    tests.

    ``WA_TEST_REDIS_DB`` names it when set (processes a run starts inherit it). Otherwise the run
    takes the first of :data:`REDIS_TEST_DBS` no other run on this machine holds, by an exclusive
    lock on a file that the system releases when the process ends, however it ends, and sets
    ``WA_TEST_REDIS_DB`` for what it starts. Two runs at once then never empty each other's
    database. Each worker of ``pytest -n`` chooses one of its own the same way: what it inherits
    from the process that started it (``WA_TEST_REDIS_DB_CHOOSER`` tells who chose) is shared
    with the other workers.
    """
    named = os.environ.get(REDIS_DB_ENV)
    worker = os.environ.get(XDIST_WORKER_ENV, "")
    if named and os.environ.get(REDIS_DB_CHOOSER_ENV, "") == worker:
        return int(named)
    for db in REDIS_TEST_DBS:
        lock = _lock_path(db).open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _held_locks.append(lock)
        os.environ[REDIS_DB_ENV] = str(db)
        os.environ[REDIS_DB_CHOOSER_ENV] = worker
        return db
    raise RuntimeError(
        f"every Redis database of {REDIS_TEST_DBS} is held by another test run on this machine; "
        f"set {REDIS_DB_ENV} to choose one"
    )


REDIS_TEST_DB = owned_redis_db()


def chose_redis_db() -> bool:
    """Whether this process chose :data:`REDIS_TEST_DB` itself (and holds its lock)."""
    return bool(_held_locks)


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def require(service: str, host: str, port: int) -> None:
    """Skip (or fail under WA_REQUIRE_SERVICES=1) when ``service`` does not answer."""
    if _reachable(host, port):
        return
    reason = f"{service} is not reachable on {host}:{port}"
    if os.environ.get("WA_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} and WA_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(reason)


def require_postgres() -> None:
    require("PostgreSQL", PG_HOST, PG_PORT)


def require_redis() -> None:
    require("Redis", REDIS_HOST, REDIS_PORT)
