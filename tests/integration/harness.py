"""Run the service the way its users do: ``serve``, pool workers and machines as real processes.

Every process gets its own session (``start_new_session=True``) and writes its output to a file
under the test's ``tmp_path``; teardown kills whole process groups, including the groups of any
descendants that opened sessions of their own, and prints the logs when the test failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx

T = TypeVar("T")

STARTUP_TIMEOUT = 45.0
CLI_TIMEOUT = 60.0
POLL_INTERVAL = 0.05
LOG_TAIL_CHARS = 12_000
OPERATOR_SCOPES = "worker_automation:read,worker_automation:write"


def cli_command() -> list[str]:
    """The ``worker-automation`` console script of the running interpreter's environment."""
    script = Path(sys.executable).with_name("worker-automation")
    if script.exists():
        return [str(script)]
    found = shutil.which("worker-automation")
    return [found] if found else [sys.executable, "-m", "worker_automation.cli"]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(**values: str) -> dict[str, str]:
    """This process's environment without any ``WA_*`` variable, plus ``values``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
    env.update(values)
    return env


def wait_until(
    probe: Callable[[], T | None],
    timeout: float,
    message: str | Callable[[], str],
    interval: float = POLL_INTERVAL,
) -> T:
    """Poll ``probe`` until it returns something truthy; AssertionError with ``message`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(message() if callable(message) else message)
        time.sleep(interval)


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid`` from /proc, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself contain spaces or parentheses.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1])


def is_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (children, grandchildren...)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        stat = _proc_stat(int(entry.name))
        if stat is not None and stat[0] != "Z":
            parents.setdefault(stat[1], []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_group_of(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        group = os.getpgid(pid)
        if group != os.getpgrp():
            os.killpg(group, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


@dataclass
class Proc:
    """One process started by a test, with its output in ``log_path``."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def send(self, sig: signal.Signals) -> None:
        """Send ``sig`` to this process only (as a supervisor would)."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def wait(self, timeout: float) -> int | None:
        """The exit code, or None if still running after ``timeout`` seconds."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """SIGKILL the process group and the groups of every descendant that left it."""
        below = descendants(self.pid) if self.alive() else []
        if self.alive():
            _kill_group_of(self.pid)
        for pid in below:
            _kill_group_of(pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)

    def wait_for_output(self, text: str, timeout: float = STARTUP_TIMEOUT, count: int = 1) -> None:
        """Wait until ``text`` appears ``count`` times in the output (fails early if it exits)."""

        def seen() -> bool:
            if self.output().count(text) >= count:
                return True
            if not self.alive():
                raise AssertionError(f"{self.name} exited ({self.popen.returncode}):\n{self.tail()}")
            return False

        wait_until(seen, timeout, lambda: f"{self.name}: {text!r} not seen:\n{self.tail()}", 0.1)

    def tail(self) -> str:
        return self.output()[-LOG_TAIL_CHARS:]


@dataclass
class Processes:
    """The processes of one test; :meth:`close` kills what is left and reports their logs."""

    directory: Path
    procs: list[Proc] = field(default_factory=list)

    def start(self, name: str, args: Sequence[str], env: Mapping[str, str], cwd: Path | None = None) -> Proc:
        log_path = self.directory / f"{len(self.procs):02d}-{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(
                list(args),
                env=dict(env),
                cwd=str(cwd or self.directory),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = Proc(name, popen, log_path)
        self.procs.append(proc)
        return proc

    def dump(self) -> None:
        """Print every process's output (pytest shows it for failed tests)."""
        for proc in self.procs:
            print(f"\n===== {proc.name} (pid {proc.pid}, exit {proc.popen.poll()}) =====")
            print(proc.tail())

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.kill()


@contextlib.contextmanager
def managed_processes(directory: Path, session: Any) -> Iterator[Processes]:
    """Processes killed at the end; their logs are printed when the test failed.

    ``session`` is the pytest session: a call-phase failure is counted before teardown runs.
    """
    directory.mkdir(parents=True, exist_ok=True)
    failed_before = session.testsfailed
    procs = Processes(directory)
    try:
        yield procs
    except BaseException:
        procs.dump()
        raise
    finally:
        if session.testsfailed > failed_before:
            procs.dump()
        procs.close()


def run_cli(args: Sequence[str], env: Mapping[str, str], cwd: Path, timeout: float = CLI_TIMEOUT) -> str:
    """Run ``worker-automation ARGS`` and return the last line of its stdout."""
    done = subprocess.run(
        [*cli_command(), *args],
        env=dict(env),
        cwd=str(cwd),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"worker-automation {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines, f"worker-automation {' '.join(args)} printed nothing:\n{done.stderr}"
    return lines[-1].strip()


def wait_ready(base_url: str, proc: Proc, timeout: float = STARTUP_TIMEOUT) -> None:
    """Wait for ``/readyz`` to answer 200 (fails at once if the server exits)."""

    def ready() -> bool:
        if not proc.alive():
            raise AssertionError(f"{proc.name} exited ({proc.popen.returncode}):\n{proc.tail()}")
        try:
            return httpx.get(f"{base_url}/readyz", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, timeout, lambda: f"{proc.name} never became ready:\n{proc.tail()}", 0.1)


def plain_dsn(database_url: str) -> str:
    """An asyncpg DSN from a SQLAlchemy URL."""
    return "postgresql://" + database_url.split("://", 1)[1]


class JobsDb:
    """Synchronous reads of the ``workers`` table, for tests that drive processes."""

    def __init__(self, database_url: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._conn: asyncpg.Connection = self._loop.run_until_complete(
            asyncpg.connect(plain_dsn(database_url))
        )

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def job(self, job_id: int) -> dict[str, Any]:
        row = self._run(self._conn.fetchrow("SELECT * FROM workers WHERE id = $1", job_id))
        assert row is not None, f"job {job_id} does not exist"
        job = dict(row)
        for key in ("context", "result", "metadata_json"):
            if isinstance(job.get(key), str):
                job[key] = json.loads(job[key])
        return job

    def statuses(self, automation_type: str | None = None) -> dict[int, str]:
        query = "SELECT id, status FROM workers"
        args: list[Any] = []
        if automation_type is not None:
            query += " WHERE automation_type = $1"
            args.append(automation_type)
        rows = self._run(self._conn.fetch(query, *args))
        return {int(r["id"]): str(r["status"]) for r in rows}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._run(self._conn.close())
        self._loop.close()


class Stack:
    """The distributed system of one test: ``serve`` on PostgreSQL + Redis, workers, machines."""

    def __init__(
        self,
        procs: Processes,
        *,
        database_url: str,
        redis_url: str,
        redis_prefix: str,
        workdir: Path,
        serve_env: Mapping[str, str] | None = None,
    ) -> None:
        self.procs = procs
        self.database_url = database_url
        self.redis_url = redis_url
        self.workdir = workdir
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}"
        self.env = clean_env(
            WA_DATABASE_URL=database_url,
            WA_REDIS_URL=redis_url,
            WA_REDIS_PREFIX=redis_prefix,
            WA_API_URL=self.api_url,
        )
        # Only for `serve` (and the CLI): WA_RECOVERY_SECONDS and the like.
        self.serve_env = {**self.env, **(serve_env or {})}
        self.http = httpx.Client(base_url=self.api_url, timeout=15.0)
        self.db = JobsDb(database_url)
        self._operator_key: str | None = None
        self._machines = 0
        self.serve_proc: Proc | None = None

    # --- processes -------------------------------------------------------------------------

    def serve(self, workers: int = 1) -> Proc:
        args = [*cli_command(), "serve", "--port", str(self.port)]
        if workers > 1:
            args += ["--workers", str(workers)]
        proc = self.procs.start("serve", args, self.serve_env, self.workdir)
        wait_ready(self.api_url, proc)
        self.serve_proc = proc
        return proc

    def cli(self, *args: str) -> str:
        return run_cli(args, self.env, self.workdir)

    def register_machine(
        self, *, queue: str | None = None, automation: str | None = None, name: str | None = None
    ) -> str:
        """A new machine's ``X-Worker-Api-Key`` (``machines register`` through the CLI)."""
        self._machines += 1
        target = ["--queue", queue] if queue else ["--automation", str(automation)]
        name = name or f"test-machine-{self._machines}"
        return self.cli("machines", "register", "--name", name, *target)

    def pool_worker(
        self,
        queue: str = "scan",
        concurrency: int = 1,
        *,
        key: str | None = None,
        grace: float | None = None,
        wait: bool = True,
        name: str | None = None,
    ) -> Proc:
        """``worker-automation worker -Q QUEUE -c N`` with a machine key and no database access
        (``name``: its Celery node name, e.g. the one of a worker it replaces)."""
        env = clean_env(
            WA_REDIS_URL=self.redis_url,
            WA_API_URL=self.api_url,
            WA_WORKER_API_KEY=key or self.register_machine(queue=queue),
        )
        if grace is not None:
            env["WA_SHUTDOWN_GRACE_SECONDS"] = str(grace)
        count = sum(1 for p in self.procs.procs if p.name.startswith("worker"))
        args = [
            *cli_command(),
            "worker",
            "-Q",
            queue,
            "-c",
            str(concurrency),
            "-n",
            name or f"w{count}-{queue}-{self.port}@test",
        ]
        proc = self.procs.start(f"worker-{queue}", args, env, self.workdir)
        if wait:
            proc.wait_for_output(" ready.")
        return proc

    def machine(
        self, automation: str, *, key: str | None = None, grace: float | None = None, concurrency: int = 1
    ) -> Proc:
        """``worker-automation machine run``: it gets only the API's address and its own key."""
        env = clean_env(
            WA_API_URL=self.api_url,
            WA_WORKER_API_KEY=key or self.register_machine(automation=automation),
        )
        if grace is not None:
            env["WA_SHUTDOWN_GRACE_SECONDS"] = str(grace)
        args = [*cli_command(), "machine", "run", "--automation", automation, "-c", str(concurrency)]
        return self.procs.start(f"machine-{automation}", args, env, self.workdir)

    # --- API -------------------------------------------------------------------------------

    @property
    def operator_headers(self) -> dict[str, str]:
        if self._operator_key is None:
            self._operator_key = self.cli(
                "keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES
            )
        return {"X-API-Key": self._operator_key}

    def dispatch(self, automation_type: str, context: dict[str, Any] | None = None, priority: int = 0) -> int:
        """``POST /api/v1/jobs``; the new job's id."""
        response = self.http.post(
            "/api/v1/jobs",
            json={
                "automation_type": automation_type,
                "cliente_id": None,
                "context": context or {},
                "priority": priority,
            },
            headers=self.operator_headers,
        )
        assert response.status_code == 201, response.text
        return int(response.json()["data"]["id"])

    def rest_job(self, job_id: int) -> dict[str, Any]:
        """``GET /api/v1/worker-automation/{id}`` (the documented item)."""
        response = self.http.get(f"/api/v1/worker-automation/{job_id}", headers=self.operator_headers)
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    def cancel(self, job_id: int) -> dict[str, Any]:
        response = self.http.post(f"/api/v1/worker-automation/{job_id}/cancel", headers=self.operator_headers)
        assert response.status_code == 200, response.text
        data: dict[str, Any] = response.json()["data"]
        return data

    def wait_status(self, job_id: int, statuses: str | set[str], timeout: float) -> dict[str, Any]:
        """The job row once its status is one of ``statuses``."""
        wanted = {statuses} if isinstance(statuses, str) else statuses
        last: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            nonlocal last
            last = self.db.job(job_id)
            return last if last["status"] in wanted else None

        return wait_until(
            probe, timeout, lambda: f"job {job_id} never reached {sorted(wanted)}; last row: {last}"
        )

    def close(self) -> None:
        self.http.close()
        self.db.close()


@contextlib.contextmanager
def served_stack(
    processes: Processes,
    database_url: str,
    redis_url: str,
    redis_prefix: str,
    tmp_path: Path,
    *,
    workers: int = 1,
    serve_env: Mapping[str, str] | None = None,
) -> Iterator[Stack]:
    """A :class:`Stack` whose ``serve`` (``workers`` processes) is up; stopped and closed after.
    ``serve_env``: settings of ``serve`` only (``WA_RECOVERY_SECONDS``, say)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    built = Stack(
        processes,
        database_url=database_url,
        redis_url=redis_url,
        redis_prefix=redis_prefix,
        workdir=workdir,
        serve_env=serve_env,
    )
    try:
        built.serve(workers)
        yield built
    finally:
        # Before the database is dropped and Redis flushed (those fixtures end after this one).
        processes.close()
        built.close()
