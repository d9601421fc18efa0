"""Operator features in the embedded mode (SQLite, no outside service): a schedule whose last two
occurrences passed before `serve` started fires once when it starts; a queue paused from the
command line holds that job until resumed from the command line, and it then runs once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.integration.harness import (
    Processes,
    clean_env,
    cli_command,
    free_port,
    managed_processes,
    wait_ready,
    wait_until,
)

READY_TIMEOUT = 90.0


@pytest.fixture
def processes(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Processes]:
    with managed_processes(tmp_path / "logs", request.session) as procs:
        yield procs


def _cli(directory: Path, *args: str) -> str:
    done = subprocess.run(
        [*cli_command(), *args], env=clean_env(), cwd=directory, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _rows(directory: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    with sqlite3.connect(directory / "worker_automation.db", timeout=30) as conn:
        return list(conn.execute(sql, params).fetchall())


def test_schedule_and_pause_in_the_embedded_mode(tmp_path: Path, processes: Processes) -> None:
    workdir = tmp_path / "embedded"
    workdir.mkdir()
    added = _cli(workdir, "schedules", "add", "--automation", "demo.echo", "--cron", "0 * * * *")
    schedule_id = int(added.split()[-1])
    assert _cli(workdir, "queues", "pause", "scan").strip() == "queue scan: paused"
    # As if serve had been down since before the occurrence of an hour ago (and of this hour).
    missed = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    with sqlite3.connect(workdir / "worker_automation.db", timeout=30) as conn:
        conn.execute(
            "UPDATE schedules SET next_run_at = ? WHERE id = ?",
            (missed.strftime("%Y-%m-%d %H:%M:%S.%f"), schedule_id),
        )

    port = free_port()
    serve = processes.start("serve", [*cli_command(), "serve", "--port", str(port)], clean_env(), workdir)
    wait_ready(f"http://127.0.0.1:{port}", serve, READY_TIMEOUT)

    def fired() -> list[tuple[object, ...]] | None:
        rows = _rows(workdir, "SELECT id, status, metadata_json FROM workers")
        return rows or None

    ((job_id, _status, metadata),) = wait_until(fired, 30, lambda: "the missed occurrence never fired")
    assert json.loads(str(metadata)) == {"schedule_id": schedule_id}
    time.sleep(3.0)  # paused: the job waits
    assert _rows(workdir, "SELECT status FROM workers WHERE id = ?", job_id) == [("AGENDADO",)]

    assert _cli(workdir, "queues", "resume", "scan").strip() == "queue scan: running"
    done = "SELECT status FROM workers WHERE id = ? AND status = 'CONCLUIDO'"
    wait_until(
        lambda: _rows(workdir, done, job_id) or None,
        45,
        lambda: f"job {job_id} never ran after resume",
    )
    assert "attempts: 1" in _cli(workdir, "jobs", "show", str(job_id))
    assert len(_rows(workdir, "SELECT id FROM workers")) == 1
    (next_run,) = _rows(workdir, "SELECT next_run_at FROM schedules WHERE id = ?", schedule_id)[0]
    assert datetime.fromisoformat(str(next_run)).replace(tzinfo=UTC) > datetime.now(UTC)
