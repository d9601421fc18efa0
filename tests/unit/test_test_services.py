"""The suite's own Redis database: two runs on one machine never share one, nor two workers of
``pytest -n``; the processes a run starts do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.services import REDIS_DB_ENV, REDIS_TEST_DB, XDIST_WORKER_ENV, chose_redis_db

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PRINT_DB = "from tests.services import REDIS_TEST_DB; print(REDIS_TEST_DB)"


def _db_of_a_process(env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PRINT_DB],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_process_the_run_starts_uses_the_runs_database() -> None:
    assert os.environ[REDIS_DB_ENV] == str(REDIS_TEST_DB)
    assert _db_of_a_process(dict(os.environ)) == REDIS_TEST_DB


def test_another_run_on_the_machine_takes_another_database() -> None:
    if not chose_redis_db():
        pytest.skip(f"{REDIS_DB_ENV} was set for this run: it holds no lock to test")
    other_run = {name: value for name, value in os.environ.items() if name != REDIS_DB_ENV}
    assert _db_of_a_process(other_run) != REDIS_TEST_DB


def test_another_worker_of_the_run_takes_another_database() -> None:
    # What a worker of ``pytest -n`` inherits names the database of the process that chose it.
    if not chose_redis_db():
        pytest.skip(f"{REDIS_DB_ENV} was set for this run: it holds no lock to test")
    other_worker = {**os.environ, XDIST_WORKER_ENV: "gw-another"}
    assert _db_of_a_process(other_worker) != REDIS_TEST_DB
