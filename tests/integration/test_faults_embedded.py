"""Faults of the embedded set-up (R6): one ``serve`` with no ``WA_REDIS_URL``, SQLite in its working
directory, its in-process broker and the pool worker processes it starts.

SIGKILL of that ``serve`` leaves no process behind, loses no queued job (they run after the
restart) and ends the jobs that were running FALHA naming the fault (or runs them again when the
automation is safe to run again). A second ``serve`` in the directory refuses to start and says
who holds it, without disturbing the first; ``dispatch`` with no ``serve`` running records the
job, says it will run when ``serve`` starts, and starts no broker of its own.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.fault_support import SqliteLedger, assert_gone, process_tree, wait_resolved
from tests.integration.harness import (
    Proc,
    Processes,
    clean_env,
    cli_command,
    free_port,
    run_cli,
    wait_ready,
    wait_until,
)

RECOVERY = 8.0
SLACK = 20.0
RUN_TIMEOUT = 30.0
ORPHAN_LIMIT = 10.0
DATABASE_FILE = "worker_automation.db"


class EmbeddedServe:
    """``worker-automation serve`` run in a directory as a developer would: no WA_DATABASE_URL
    (the SQLite file of the directory), no WA_REDIS_URL (the embedded broker and pool workers)."""

    def __init__(self, procs: Processes, workdir: Path) -> None:
        self.procs = procs
        self.workdir = workdir
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}"
        self.env = clean_env(WA_RECOVERY_SECONDS=str(RECOVERY))
        self.ledger = SqliteLedger(workdir / DATABASE_FILE)
        self._key: str | None = None

    def start(self, port: int | None = None, *, wait: bool = True) -> Proc:
        args = [*cli_command(), "serve", "--port", str(port or self.port)]
        proc = self.procs.start("serve-embedded", args, self.env, self.workdir)
        if wait:
            wait_ready(self.api_url, proc)
        return proc

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli_command(), *args], env=self.env, cwd=self.workdir, capture_output=True, text=True,
            timeout=RUN_TIMEOUT, check=False,
        )  # fmt: skip

    @property
    def headers(self) -> dict[str, str]:
        if self._key is None:
            self._key = run_cli(
                ["keys", "create", "--perfil", "administrador", "--scopes",
                 "worker_automation:read,worker_automation:write"],
                self.env, self.workdir,
            )  # fmt: skip
        return {"X-API-Key": self._key}

    def dispatch(self, automation: str, context: dict[str, Any]) -> int:
        body = {"automation_type": automation, "cliente_id": None, "context": context, "priority": 0}
        response = httpx.post(f"{self.api_url}/api/v1/jobs", json=body, headers=self.headers, timeout=15.0)
        assert response.status_code == 201, response.text
        return int(response.json()["data"]["id"])

    def status(self, job_id: int) -> str:
        return self.ledger.fates()[job_id].status


@pytest.fixture
def embedded(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EmbeddedServe]:
    from tests.integration.harness import managed_processes

    workdir = tmp_path / "project"
    workdir.mkdir()
    with managed_processes(tmp_path / "logs", request.session) as procs:
        yield EmbeddedServe(procs, workdir)


def test_embedded_serve_killed_leaves_nothing_behind_and_loses_no_queued_job(
    embedded: EmbeddedServe,
) -> None:
    serve = embedded.start()
    embedded.ledger.install()
    # The scan pool runs one job at a time: the long one runs, the echoes wait in the queue.
    long_run = embedded.dispatch("demo.sleep", {"seconds": 60})
    wait_until(lambda: embedded.status(long_run) == "EXECUTANDO", RUN_TIMEOUT, "the long job never ran", 0.1)
    queued = [embedded.dispatch("demo.echo", {"n": n}) for n in range(6)]
    tree = process_tree(serve.pid)
    assert len(tree) > 1, "no pool worker processes under serve"

    serve.send(signal.SIGKILL)
    assert_gone(tree, ORPHAN_LIMIT, "the killed serve")
    assert all(embedded.status(job_id) == "AGENDADO" for job_id in queued)

    embedded.start()
    verdict = wait_resolved(embedded.ledger, RECOVERY + SLACK, expected=len(queued) + 1)
    verdict.assert_clean(jobs=len(queued) + 1)
    for job_id in queued:
        assert verdict.fates[job_id].status == "CONCLUIDO", verdict.fates[job_id].describe()
    killed = verdict.fates[long_run]
    assert killed.fault_named, killed.describe()
    assert killed.status == "FALHA" or killed.requeues == 1, killed.describe()


def test_second_serve_refuses_and_dispatch_waits_for_serve(embedded: EmbeddedServe) -> None:
    first = embedded.start()
    embedded.ledger.install()
    # A typo in --port: the same directory, another port.
    second = embedded.start(free_port(), wait=False)
    code = second.wait(RUN_TIMEOUT)
    assert code is not None and code != 0, f"second serve: exit {code}\n{second.tail()}"
    assert str(first.pid) in second.output(), f"does not say who holds the directory:\n{second.tail()}"
    assert first.alive()
    # The first one keeps working: its pool workers' keys and its broker are untouched.
    job_id = embedded.dispatch("demo.echo", {"ainda": "funciona"})
    wait_until(lambda: embedded.status(job_id) == "CONCLUIDO", RUN_TIMEOUT, "the first serve stopped working")

    first.send(signal.SIGTERM)
    assert first.wait(RUN_TIMEOUT + 20) is not None, "serve did not stop on SIGTERM"

    done = embedded.cli("dispatch", "demo.echo", "--context", '{"depois": true}')
    assert done.returncode == 0, done
    later = int(done.stdout.split()[-1])
    assert "serve" in done.stdout.lower(), f"does not say the job waits for serve:\n{done.stdout}"
    assert embedded.status(later) == "AGENDADO"
    assert not (embedded.workdir / ".worker-automation-broker").exists()

    embedded.start()
    verdict = wait_resolved(embedded.ledger, RECOVERY + SLACK, expected=2)
    verdict.assert_clean(jobs=2)
    assert verdict.fates[later].status == "CONCLUIDO", verdict.fates[later].describe()
