"""Zero setup: ``worker-automation serve`` in an empty directory with no configuration brings up the
whole system (SQLite, embedded broker, pool workers); jobs run, cancel stops them, the CLI beside it
dispatches through the same broker, and Ctrl-C leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.harness import (
    OPERATOR_SCOPES,
    Processes,
    clean_env,
    cli_command,
    descendants,
    free_port,
    is_running,
    managed_processes,
    run_cli,
    wait_ready,
    wait_until,
)
from worker_automation.resolvers.lost_runs import LOST_RUN_MESSAGE

READY_TIMEOUT = 90.0
# The first job waits for the embedded pool workers to connect.
FIRST_JOB_TIMEOUT = 60.0
JOB_TIMEOUT = 20.0
EXIT_TIMEOUT = 40.0
TERMINAL = {"CONCLUIDO", "FALHA", "CANCELADO"}


@pytest.fixture
def processes(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Processes]:
    with managed_processes(tmp_path / "logs", request.session) as procs:
        yield procs


MakeUser = Callable[[Path, int], "Embedded"]


@pytest.fixture
def users() -> Iterator[MakeUser]:
    """Users' terminals (:class:`Embedded`), their HTTP connections closed after the test."""
    made: list[Embedded] = []

    def make(directory: Path, port: int) -> Embedded:
        made.append(Embedded(directory, port))
        return made[-1]

    yield make
    for user in made:
        user.close()


class Embedded:
    """A user's terminal in ``directory``: no WA_* variable at all."""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory = directory
        self.env = clean_env()
        self.url = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(base_url=self.url, timeout=15.0)
        self.headers: dict[str, str] = {}

    def close(self) -> None:
        self.http.close()

    def cli(self, *args: str) -> str:
        return run_cli(args, self.env, self.directory)

    def create(self, automation_type: str, context: dict[str, Any]) -> int:
        body = {"automation_type": automation_type, "cliente_id": None, "context": context, "priority": 0}
        response = self.http.post("/api/v1/jobs", json=body, headers=self.headers)
        assert response.status_code == 201, response.text
        return int(response.json()["data"]["id"])

    def job(self, job_id: int) -> dict[str, Any]:
        response = self.http.get(f"/api/v1/worker-automation/{job_id}", headers=self.headers)
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    def wait(self, job_id: int, statuses: set[str], timeout: float) -> dict[str, Any]:
        last: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            nonlocal last
            last = self.job(job_id)
            return last if last["status"] in statuses else None

        return wait_until(probe, timeout, lambda: f"job {job_id} never reached {statuses}: {last}", 0.1)

    def _stored(self, column: str, job_id: int) -> Any:
        """A column of the job's row, read from the SQLite file the way any local tool could."""
        path = self.directory / "worker_automation.db"
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
            (value,) = conn.execute(f"SELECT {column} FROM workers WHERE id = ?", (job_id,)).fetchone()
        return value

    def result(self, job_id: int) -> Any:
        raw = self._stored("result", job_id)
        return json.loads(raw) if isinstance(raw, str) else raw

    def stored_status(self, job_id: int) -> str:
        return str(self._stored("status", job_id))


def test_serve_with_no_configuration_runs_everything(
    tmp_path: Path, processes: Processes, users: MakeUser
) -> None:
    workdir = tmp_path / "empty"
    workdir.mkdir()
    port = free_port()
    user = users(workdir, port)
    started = time.monotonic()
    serve = processes.start("serve", [*cli_command(), "serve", "--port", str(port)], user.env, workdir)
    wait_ready(user.url, serve, READY_TIMEOUT)
    ready_after = time.monotonic() - started
    assert (workdir / "worker_automation.db").exists()
    assert (workdir / ".worker-automation-broker").exists()

    key = user.cli("keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES)
    user.headers = {"X-API-Key": key}

    echo = user.create("demo.echo", {"ola": "mundo"})
    assert user.wait(echo, TERMINAL, FIRST_JOB_TIMEOUT)["status"] == "CONCLUIDO"
    assert user.result(echo) == {"ola": "mundo"}

    # Cancel really stops a running job: the single scan worker is free again right after.
    sleeper = user.create("demo.sleep", {"seconds": 60})
    wait_until(
        lambda: (row := user.job(sleeper))["status"] == "EXECUTANDO" and row["progress"] >= 1,
        JOB_TIMEOUT,
        lambda: f"the 60 s sleep never ran: {user.job(sleeper)}",
        0.1,
    )
    response = user.http.post(f"/api/v1/worker-automation/{sleeper}/cancel", headers=user.headers)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["status"] == "CANCELADO"
    frozen = user.job(sleeper)["progress"]
    after = user.create("demo.echo", {"depois": 1})
    assert user.wait(after, TERMINAL, JOB_TIMEOUT)["status"] == "CONCLUIDO"
    time.sleep(0.5)
    stopped = user.job(sleeper)
    assert stopped["status"] == "CANCELADO" and stopped["progress"] == frozen

    # The CLI run beside it finds the embedded broker and database on its own.
    dispatched = int(user.cli("dispatch", "demo.echo", "--context", '{"via": "cli"}'))
    assert user.wait(dispatched, TERMINAL, JOB_TIMEOUT)["status"] == "CONCLUIDO"
    assert user.result(dispatched) == {"via": "cli"}

    # A job running when Ctrl-C comes still ends reported: serve stops its pool workers while
    # the API still answers them (they have 10 s of grace; this job needs 3).
    running = user.create("demo.sleep", {"seconds": 3})
    wait_until(
        lambda: user.job(running)["status"] == "EXECUTANDO",
        JOB_TIMEOUT,
        lambda: f"the 3 s sleep never ran: {user.job(running)}",
        0.1,
    )

    # Ctrl-C: serve stops its pool workers and leaves no process behind.
    children = descendants(serve.pid)
    assert len(children) >= 5, f"expected the pool workers below serve, found {children}"
    stop_started = time.monotonic()
    serve.send(signal.SIGINT)
    code = serve.wait(EXIT_TIMEOUT)
    stop_took = time.monotonic() - stop_started
    assert code is not None, f"serve still running {EXIT_TIMEOUT}s after SIGINT"
    wait_until(
        lambda: not [pid for pid in children if is_running(pid)],
        3.0,
        lambda: f"left behind: {[pid for pid in children if is_running(pid)]}",
    )
    assert not (workdir / ".worker-automation-broker").exists()
    assert user.stored_status(running) == "CONCLUIDO"
    print(f"ready after {ready_after:.1f}s, stopped {stop_took:.1f}s after SIGINT (exit {code})")


def test_restarting_serve_keeps_queued_jobs_and_ends_the_ones_it_was_running(
    tmp_path: Path, processes: Processes, users: MakeUser
) -> None:
    workdir = tmp_path / "restart"
    workdir.mkdir()
    port = free_port()
    user = users(workdir, port)
    command = [*cli_command(), "serve", "--port", str(port)]
    serve = processes.start("serve", command, user.env, workdir)
    wait_ready(user.url, serve, READY_TIMEOUT)
    user.headers = {
        "X-API-Key": user.cli("keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES)
    }

    # The scan queue's single process is kept busy; two more jobs wait behind it in the broker.
    sleeper = user.create("demo.sleep", {"seconds": 60})
    user.wait(sleeper, {"EXECUTANDO"}, FIRST_JOB_TIMEOUT)
    waiting = [user.create("demo.echo", {"n": n}) for n in range(2)]
    serve.send(signal.SIGINT)
    assert serve.wait(EXIT_TIMEOUT) is not None, "serve did not stop"
    # The running job was reported failed at the end of the workers' grace period, while the
    # API still answered; the queued ones stay AGENDADO, and the next start sends them again.
    assert user.stored_status(sleeper) == "FALHA"
    assert [user.stored_status(job) for job in waiting] == ["AGENDADO", "AGENDADO"]
    assert not (workdir / ".worker-automation.lock").exists()
    # One line per event: no Celery banner or task list, no warning per pool process, and no
    # advice to press Ctrl-C again (the pool workers' grace ended in a cold shutdown here).
    output = serve.output()
    assert "[tasks]" not in output and "SecurityWarning" not in output
    assert "Ctrl+C again" not in output
    assert "Warm shutdown" in output

    serve = processes.start("serve-again", command, user.env, workdir)
    wait_ready(user.url, serve, READY_TIMEOUT)
    for n, job in enumerate(waiting):
        assert user.wait(job, TERMINAL, FIRST_JOB_TIMEOUT)["status"] == "CONCLUIDO"
        assert user.result(job) == {"n": n}

    # Killed outright, serve reports nothing, and its pool workers die with it: the next start
    # ends what they were running (demo.sleep is not safe to run again) and sends the queue again.
    crashed = user.create("demo.sleep", {"seconds": 60})
    user.wait(crashed, {"EXECUTANDO"}, JOB_TIMEOUT)
    queued = user.create("demo.echo", {"after": "crash"})
    children = descendants(serve.pid)
    os.kill(serve.pid, signal.SIGKILL)
    serve.wait(EXIT_TIMEOUT)
    wait_until(
        lambda: not [pid for pid in children if is_running(pid)],
        10.0,
        lambda: f"left behind after SIGKILL: {[pid for pid in children if is_running(pid)]}",
    )
    assert user.stored_status(crashed) == "EXECUTANDO"
    serve = processes.start("serve-after-crash", command, user.env, workdir)
    wait_ready(user.url, serve, READY_TIMEOUT)
    row = user.wait(crashed, TERMINAL, JOB_TIMEOUT)
    assert row["status"] == "FALHA"
    assert row["mensagem_erro"] == LOST_RUN_MESSAGE
    assert user.wait(queued, TERMINAL, FIRST_JOB_TIMEOUT)["status"] == "CONCLUIDO"
    serve.send(signal.SIGINT)
    serve.wait(EXIT_TIMEOUT)


def test_one_serve_per_directory_and_commands_never_start_a_broker(
    tmp_path: Path, processes: Processes, users: MakeUser
) -> None:
    workdir = tmp_path / "one"
    workdir.mkdir()
    port = free_port()
    user = users(workdir, port)

    # No serve yet: the job is recorded and waits for one.
    dispatched = subprocess.run(
        [*cli_command(), "dispatch", "demo.echo", "--context", '{"before": "serve"}'],
        cwd=workdir,
        env=user.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dispatched.returncode == 0, dispatched.stderr
    recorded = int(dispatched.stdout.strip().splitlines()[-1])
    assert "runs when `worker-automation serve` starts" in dispatched.stdout
    assert user.stored_status(recorded) == "AGENDADO"
    assert not (workdir / ".worker-automation-broker").exists()
    done = subprocess.run(
        [*cli_command(), "reconcile"], cwd=workdir, env=user.env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "no serve is running" in done.stderr

    serve = processes.start("serve", [*cli_command(), "serve", "--port", str(port)], user.env, workdir)
    wait_ready(user.url, serve, READY_TIMEOUT)
    user.headers = {
        "X-API-Key": user.cli("keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES)
    }
    assert user.wait(recorded, TERMINAL, FIRST_JOB_TIMEOUT)["status"] == "CONCLUIDO"

    # A second serve here (a typo in --port, say) refuses, naming the first; the first goes on.
    second = subprocess.run(
        [*cli_command(), "serve", "--port", str(free_port())],
        cwd=workdir,
        env=user.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert f"pid {serve.pid}" in second.stderr and "already running" in second.stderr
    assert (workdir / ".worker-automation-broker").exists()
    after = user.create("demo.echo", {"after": "second"})
    assert user.wait(after, TERMINAL, JOB_TIMEOUT)["status"] == "CONCLUIDO"

    bad_port = subprocess.run(
        [*cli_command(), "serve", "--port", "70000"],
        cwd=workdir,
        env=user.env,
        capture_output=True,
        text=True,
    )
    assert bad_port.returncode == 2 and "65535" in bad_port.stderr
    serve.send(signal.SIGINT)
    assert serve.wait(EXIT_TIMEOUT) is not None
