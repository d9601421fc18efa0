"""Where the real PostgreSQL and Redis are, and what to do when one is missing.

With ``WA_REQUIRE_SERVICES=1`` (as in CI) a missing service fails the test; otherwise the test is
skipped with a reason naming the service.
"""

from __future__ import annotations

import os
import socket

import pytest

PG_HOST = os.environ.get("WA_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("WA_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("WA_TEST_PG_USER", "postgres")
REDIS_HOST = os.environ.get("WA_TEST_REDIS_HOST", "127.0.0.1")
REDIS_PORT = int(os.environ.get("WA_TEST_REDIS_PORT", "6379"))
# Redis database numbers owned by this test suite (others on the machine are left alone).
REDIS_TEST_DB = int(os.environ.get("WA_TEST_REDIS_DB", "13"))


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
