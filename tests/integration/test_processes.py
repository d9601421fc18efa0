"""Which processes are up, with real ones: a Celery pool worker and a dedicated machine appear,
say what they run, and go SILENT or GONE when killed; queued jobs say why they wait (a paused
queue, a concurrency limit, nobody on the queue); the command line lists the same processes.

The broker is a Redis of this module's own: Celery's inspect reaches every worker on a broker, so
another test's workers on the shared one would answer too.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import Processes, Stack, clean_env, cli_command, wait_until
from tests.integration.private_services import PrivateRedis

# How often a worker with task events on beats (Celery's worker heartbeat with -E here).
HEARTBEAT_SECONDS = 2.0
PROCESSES = "{ processes { name kind queues concurrency runningJobIds status lastSeenAt machineId } }"
WAITING = "query($id: Int!) { worker(id: $id) { status waitingReason queuePosition } }"


@contextlib.contextmanager
def _stack(
    processes: Processes,
    database_url: str,
    redis: PrivateRedis,
    prefix: str,
    tmp_path: Path,
    **serve_env: str,
) -> Iterator[Stack]:
    redis.start()
    redis.flushall()
    workdir = tmp_path / "work"
    workdir.mkdir()
    built = Stack(
        processes,
        database_url=database_url,
        redis_url=redis.url(),
        redis_prefix=prefix,
        workdir=workdir,
        serve_env=serve_env,
    )
    try:
        built.serve()
        yield built
    finally:
        processes.close()
        built.close()


@pytest.fixture
def own_stack(
    processes: Processes,
    pg_database_url: str,
    private_redis_server: PrivateRedis,
    redis_prefix: str,
    tmp_path: Path,
) -> Iterator[Stack]:
    with _stack(processes, pg_database_url, private_redis_server, redis_prefix, tmp_path) as built:
        yield built


def _graphql(stack: Stack, query: str, variables: dict[str, Any] | None = None) -> Any:
    response = stack.http.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=stack.operator_headers
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


def _process(stack: Stack, name: str, status: str, **expected: Any) -> dict[str, Any] | None:
    for p in _graphql(stack, PROCESSES)["processes"]:
        if p["name"] == name and p["status"] == status and all(p[k] == v for k, v in expected.items()):
            found: dict[str, Any] = p
            return found
    return None


def _waiting(stack: Stack, job_id: int) -> tuple[str, int]:
    job = _graphql(stack, WAITING, {"id": job_id})["worker"]
    assert job["status"] == "AGENDADO", job
    return job["waitingReason"], job["queuePosition"]


def _mutate(stack: Stack, query: str) -> None:
    _graphql(stack, query)


def test_processes_and_why_jobs_wait_with_real_workers(own_stack: Stack) -> None:
    stack = own_stack
    _mutate(stack, 'mutation { updateAutomationSettings(key: "demo.sleep", maxConcurrentJobs: 1) { key } }')

    # Nobody consumes scan yet.
    first = stack.dispatch("demo.sleep", {"seconds": 20})
    assert _waiting(stack, first) == ("NO_PROCESS_ON_QUEUE", 1)
    assert _graphql(stack, PROCESSES)["processes"] == []

    # A pool worker comes up and takes the first job; the second waits for the limit of 1.
    node = f"procs-scan-{stack.port}@test"
    worker = stack.pool_worker("scan", concurrency=2, name=node)
    stack.wait_status(first, "EXECUTANDO", 30)
    seen = wait_until(
        lambda: _process(stack, node, "ONLINE", runningJobIds=[first]), 20, lambda: "worker never ONLINE"
    )
    assert seen["kind"] == "POOL" and seen["queues"] == ["scan"] and seen["concurrency"] == 2
    assert seen["machineId"] is not None and seen["lastSeenAt"]
    second = stack.dispatch("demo.sleep", {"seconds": 1})
    wait_until(
        lambda: _waiting(stack, second) == ("CONCURRENCY_LIMIT", 1) or None,
        20,
        lambda: f"second job waits for {_waiting(stack, second)}",
    )

    # A paused queue holds its jobs whatever else applies.
    _mutate(stack, 'mutation { pauseQueue(queue: "scan") { queue } }')
    third = stack.dispatch("demo.echo", {})
    assert _waiting(stack, second) == ("QUEUE_PAUSED", 1)
    assert _waiting(stack, third) == ("QUEUE_PAUSED", 2)

    # A dedicated machine is a process while its subscription is open, and GONE once it closes.
    machine = stack.machine("demo.fail")
    found = wait_until(
        lambda: next(
            (
                p
                for p in _graphql(stack, PROCESSES)["processes"]
                if p["kind"] == "MACHINE" and p["status"] == "ONLINE"
            ),
            None,
        ),
        30,
        lambda: f"machine never ONLINE: {machine.tail()}",
    )
    assert found["queues"] == ["scan"] and found["concurrency"] is None and found["runningJobIds"] == []

    # The command line sees the same processes.
    listed = json.loads(stack.cli("processes", "--json"))
    assert {(p["name"], p["kind"], p["status"]) for p in listed} >= {
        (node, "POOL", "ONLINE"),
        (found["name"], "MACHINE", "ONLINE"),
    }
    table = subprocess.run(
        [*cli_command(), "processes"],
        env=stack.env,
        cwd=stack.workdir,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "KIND", "STATUS"]
    assert any(line.split()[:3] == [node, "POOL", "ONLINE"] for line in table[1:]), table

    machine.kill()
    wait_until(lambda: _process(stack, found["name"], "GONE"), 30, lambda: "machine never GONE")

    # A pool worker killed outright stops answering: SILENT (not yet known gone).
    worker.send(signal.SIGKILL)
    wait_until(lambda: _process(stack, node, "SILENT", runningJobIds=[]), 30, lambda: "worker never SILENT")


def test_processes_need_a_read_key(own_stack: Stack) -> None:
    response = httpx.post(f"{own_stack.api_url}/graphql", json={"query": PROCESSES}, timeout=15.0)
    assert "errors" in response.json()


def test_with_task_events_a_stopped_worker_is_gone_at_once(
    processes: Processes,
    pg_database_url: str,
    private_redis_server: PrivateRedis,
    redis_prefix: str,
    tmp_path: Path,
) -> None:
    """Task events on: workers beat and say when they stop (worker-offline), so a worker shut
    down is GONE at once instead of SILENT for half a minute."""
    with _stack(
        processes, pg_database_url, private_redis_server, redis_prefix, tmp_path, WA_TASK_EVENTS="true"
    ) as stack:
        node = f"beats-scan-{stack.port}@test"
        env = clean_env(
            WA_REDIS_URL=stack.redis_url,
            WA_API_URL=stack.api_url,
            WA_WORKER_API_KEY=stack.register_machine(queue="scan"),
            WA_TASK_EVENTS="true",
        )
        worker = stack.procs.start(
            "worker-scan", [*cli_command(), "worker", "-Q", "scan", "-c", "1", "-n", node], env, stack.workdir
        )
        worker.wait_for_output(" ready.")
        wait_until(
            lambda: _process(stack, node, "ONLINE", queues=["scan"]), 20, lambda: "worker never ONLINE"
        )
        # The receiver listens from the first question on (the inspection may show the worker
        # ONLINE before it does), and pub/sub keeps nothing: keep asking while the worker beats
        # (every 2 s) a few times, so that the receiver has had time to subscribe before it stops.
        listening_until = time.monotonic() + 3 * HEARTBEAT_SECONDS
        while time.monotonic() < listening_until:
            assert _process(stack, node, "ONLINE", queues=["scan"]), "worker no longer ONLINE"
            time.sleep(0.5)
        worker.send(signal.SIGTERM)
        assert worker.wait(30) is not None
        stopped = time.monotonic()
        wait_until(lambda: _process(stack, node, "GONE"), 20, lambda: "worker never GONE")
        assert time.monotonic() - stopped < 20
