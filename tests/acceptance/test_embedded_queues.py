"""The embedded pool serves every queue with its documented number of processes: jobs moved to
each queue run there, as many at once as the queue has workers and never more."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.test_embedded import READY_TIMEOUT, TERMINAL, Embedded, MakeUser, users
from tests.integration.harness import (
    OPERATOR_SCOPES,
    Processes,
    cli_command,
    free_port,
    managed_processes,
    wait_ready,
)
from worker_automation.settings import DEFAULT_QUEUES

# Long enough for a queue's workers to be seen running together, under a loaded machine too.
SLEEP_SECONDS = 4
ROUND_TIMEOUT = 120.0
__all__ = ["users"]
# demo.sleep runs at most 5 at once: the queues are tried in two rounds that stay under it.
ROUNDS = (("certidao", "scraping"), ("scan", "observer", "ui_automation"))


@pytest.fixture
def processes(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Processes]:
    with managed_processes(tmp_path / "logs", request.session) as procs:
        yield procs


def run_round(user: Embedded, queues: tuple[str, ...]) -> dict[str, int]:
    """One more job per queue than it has workers, moved there while ``scan`` is paused (so
    that none starts on demo.sleep's own queue first); the most seen running at once per queue."""
    jobs: dict[int, str] = {}
    for queue in queues:
        for _ in range(DEFAULT_QUEUES[queue] + 1):
            job = user.create("demo.sleep", {"seconds": SLEEP_SECONDS})
            if queue != "scan":
                path = f"/api/v1/worker-automation/{job}/move"
                moved = user.http.post(path, json={"target_queue": queue}, headers=user.headers)
                assert moved.status_code == 200, moved.text
            jobs[job] = queue
    if "scan" in queues:
        user.cli("queues", "resume", "scan")
    most = dict.fromkeys(queues, 0)
    deadline = time.monotonic() + ROUND_TIMEOUT
    while time.monotonic() < deadline:
        rows = {job: user.job(job) for job in jobs}
        running = [jobs[job] for job, row in rows.items() if row["status"] == "EXECUTANDO"]
        for queue in queues:
            most[queue] = max(most[queue], running.count(queue))
        if all(row["status"] in TERMINAL for row in rows.values()):
            assert {row["status"] for row in rows.values()} == {"CONCLUIDO"}, rows
            assert {job: row["queue"] for job, row in rows.items()} == jobs
            return most
        time.sleep(0.1)
    pytest.fail(f"jobs still open after {ROUND_TIMEOUT:.0f} s: {[user.job(job) for job in jobs]}")


def test_every_queue_runs_its_jobs_with_its_documented_workers(
    tmp_path: Path, processes: Processes, users: MakeUser
) -> None:
    port = free_port()
    user = users(tmp_path, port)
    serve = processes.start("serve", [*cli_command(), "serve", "--port", str(port)], user.env, tmp_path)
    wait_ready(user.url, serve, READY_TIMEOUT)
    key = user.cli("keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES)
    user.headers = {"X-API-Key": key}
    user.cli("queues", "pause", "scan")

    seen: dict[str, int] = {}
    for queues in ROUNDS:
        seen.update(run_round(user, queues))
    assert seen == DEFAULT_QUEUES, serve.output()
