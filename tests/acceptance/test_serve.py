"""``worker-automation serve`` with zero setup: SQLite, embedded broker and pool workers, clean Ctrl-C."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from worker_automation.infra.logs import FORCED_EXIT_MESSAGE
from worker_automation.process.bootstrap import EMBEDDED_KEYS_DIR
from worker_automation.settings import DEFAULT_QUEUES

START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
API = "/api/v1/worker-automation"
QUEUE_COUNT = 5


def cli_command() -> list[str]:
    """The installed console script, as a user would call it (the module as a fallback)."""
    beside_python = Path(sys.executable).with_name("worker-automation")
    if beside_python.exists():
        return [str(beside_python)]
    found = shutil.which("worker-automation")
    if found:
        return [found]
    return [sys.executable, "-m", "worker_automation.cli"]


def clean_env() -> dict[str, str]:
    """The caller's environment without any of the service's settings."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("WA_")}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children_of(pid: int) -> list[int]:
    try:
        import psutil
    except ImportError:
        done = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
        return [int(line) for line in done.stdout.split()]
    try:
        return [child.pid for child in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def descendants_of(pid: int) -> set[int]:
    found: set[int] = set()
    pending = [pid]
    while pending:
        for child in children_of(pending.pop()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def is_running(pid: int) -> bool:
    """Alive and not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        # Gone in between, or no procfs at all (then kill() is all there is to go on).
        return not Path("/proc/self").exists()
    # The state letter follows the parenthesised command name.
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def running_in(directory: Path) -> set[int]:
    """Processes whose working directory is ``directory`` (every process serve starts inherits it)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return set()
    found: set[int] = set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == directory:
                found.add(int(entry.name))
        except OSError:
            continue
    return {pid for pid in found if pid != os.getpid() and is_running(pid)}


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    cwd: Path
    log: Path
    seen: set[int]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-6000:]

    def track(self) -> set[int]:
        """Remember every process serve has started so far."""
        self.seen |= descendants_of(self.process.pid)
        return self.seen


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [*cli_command(), "serve", "--port", str(port)],
            cwd=tmp_path,
            env=clean_env(),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    started = Server(process, port, tmp_path, log, set())
    try:
        yield started
    finally:
        # Only what this test started: serve itself and the processes it spawned.
        leftovers = started.track() | running_in(tmp_path)
        if process.poll() is None:
            process.kill()
            process.wait(10)
        for pid in leftovers:
            if is_running(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def wait_for(server: Server, path: str, timeout: float) -> httpx.Response:
    """Poll ``path`` until it answers 200 (or fail with serve's output)."""
    deadline = time.monotonic() + timeout
    last: str = "no answer"
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"serve exited with {server.process.returncode}:\n{server.output()}")
        server.track()
        try:
            response = httpx.get(server.url + path, timeout=5.0)
        except httpx.HTTPError as exc:
            last = repr(exc)
        else:
            if response.status_code == 200:
                return response
            last = f"{response.status_code} {response.text[:300]}"
        time.sleep(0.25)
    pytest.fail(f"{path} not 200 within {timeout:.0f} s (last: {last}):\n{server.output()}")


def create_key(cwd: Path) -> str:
    done = subprocess.run(
        [
            *cli_command(),
            "keys",
            "create",
            "--perfil",
            "funcionario",
            "--scopes",
            "worker_automation:read",
        ],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    key = done.stdout.strip().splitlines()[-1].strip()
    assert key.startswith("wak_")
    return key


def dispatch_echo(cwd: Path) -> str:
    """Dispatch ``demo.echo`` from the command line; its task id."""
    done = subprocess.run(
        [*cli_command(), "dispatch", "demo.echo", "--context", json.dumps({"eco": "ola"})],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    match = re.search(r"\(task ([^)]+)\)", done.stdout)
    assert match, done.stdout
    return match.group(1)


def wait_for_task(server: Server, key: str, task_id: str, timeout: float) -> dict[str, Any]:
    """Poll ``/status/{task_id}`` until the task is no longer pending or running."""
    deadline = time.monotonic() + timeout
    data: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = httpx.get(f"{server.url}{API}/status/{task_id}", headers={"X-API-Key": key}, timeout=10.0)
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        if data["status"] not in ("PENDING", "STARTED"):
            return data
        time.sleep(0.25)
    pytest.fail(f"task {task_id} still {data.get('status')} after {timeout:.0f} s:\n{server.output()}")


def pool_workers(serve: int) -> list[int]:
    """The queues' Celery workers: forked by the one process ``serve`` starts for them (each
    forks its own pool processes in turn)."""
    return [worker for launcher in children_of(serve) for worker in children_of(launcher)]


def wait_for_pool_workers(server: Server, timeout: float) -> set[int]:
    """The embedded pool: a worker process per queue under serve (they fork their own children)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(pool_workers(server.process.pid)) >= QUEUE_COUNT:
            break
        time.sleep(0.25)
    # Let the pool workers fork their own children before taking the census.
    time.sleep(2.0)
    return server.track()


# SIGINT is Ctrl-C in a terminal; SIGTERM is what a container runtime or systemd sends.
@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_with_zero_setup_answers_and_stops_cleanly(server: Server, stop_signal: signal.Signals) -> None:
    health = wait_for(server, "/healthz", START_TIMEOUT)
    assert health.status_code == 200

    ready = wait_for(server, "/readyz", START_TIMEOUT)
    body = ready.json()
    assert body["checks"] == {"database": True, "broker": True, "workers": True}
    assert body["down"] == []
    # The default database is a file in the directory serve was started in.
    assert (server.cwd / "worker_automation.db").exists()

    # A key made by another command in the same directory works on the running server.
    key = create_key(server.cwd)
    stats = httpx.get(f"{server.url}{API}/stats", headers={"X-API-Key": key}, timeout=10.0)
    assert stats.status_code == 200, stats.text
    payload = stats.json()
    assert payload["status"] == "success"
    assert set(payload["data"]["by_queue"]) == {"certidao", "scraping", "scan", "observer", "ui_automation"}
    bearer = httpx.get(f"{server.url}{API}/stats", headers={"Authorization": f"Bearer {key}"}, timeout=10.0)
    assert bearer.status_code == 200
    anonymous = httpx.get(f"{server.url}{API}/stats", timeout=10.0)
    assert anonymous.status_code == 401
    assert anonymous.json()["status"] == "error"

    # The embedded pool really runs jobs: a demo job dispatched from the CLI ends CONCLUIDO.
    task_id = dispatch_echo(server.cwd)
    finished = wait_for_task(server, key, task_id, START_TIMEOUT)
    assert finished["status"] == "SUCCESS", finished
    assert finished["result"] == {"eco": "ola"}

    spawned = wait_for_pool_workers(server, START_TIMEOUT)
    assert len(children_of(server.process.pid)) == 1, server.output()
    assert len(pool_workers(server.process.pid)) == QUEUE_COUNT, server.output()

    server.process.send_signal(stop_signal)
    try:
        server.process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve still running {STOP_TIMEOUT:.0f} s after {stop_signal.name}:\n{server.output()}")

    assert server.process.returncode in (0, -stop_signal, 128 + stop_signal), server.output()
    # Its pool workers may need a moment after serve returns to be reaped by the system.
    deadline = time.monotonic() + 5.0
    left = {pid for pid in spawned if is_running(pid)} | running_in(server.cwd)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = {pid for pid in left if is_running(pid)}
    assert not left, f"processes left behind: {sorted(left)}\n{server.output()}"
    # Nothing stale for later commands to trip on (such as the embedded broker's address); the
    # pool workers' keys are kept on purpose, for the next start.
    left_files = sorted(p.name for p in server.cwd.iterdir() if p.name.startswith("."))
    assert left_files in ([], [EMBEDDED_KEYS_DIR]), left_files


def test_a_second_ctrl_c_stops_at_once_and_says_what_that_skips(server: Server) -> None:
    wait_for(server, "/readyz", START_TIMEOUT)
    wait_for_pool_workers(server, START_TIMEOUT)
    server.process.send_signal(signal.SIGINT)
    wait_for_output(server, "stopping the pool workers", STOP_TIMEOUT)
    server.process.send_signal(signal.SIGINT)
    try:
        server.process.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve still running {STOP_TIMEOUT:.0f} s after a second SIGINT:\n{server.output()}")

    output = server.output()
    assert "Traceback" not in output and "CancelledError" not in output, output
    assert FORCED_EXIT_MESSAGE in output, output


KEY_COMMAND = (
    "worker-automation keys create --perfil administrador "
    "--scopes worker_automation:read,worker_automation:write"
)


def wait_for_output(server: Server, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = server.log.read_text(errors="replace")
        if text in output:
            return output
        if server.process.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"{text!r} not written within {timeout:.0f} s:\n{server.output()}")


def test_ready_only_once_its_pool_workers_are_then_says_where_things_are(server: Server) -> None:
    seen_waiting = False
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert server.process.poll() is None, server.output()
        try:
            response = httpx.get(server.url + "/readyz", timeout=5.0)
        except httpx.HTTPError:
            time.sleep(0.1)
            continue
        if response.status_code == 200:
            break
        assert response.json()["down"] == ["workers"], response.text
        seen_waiting = True
        time.sleep(0.1)
    else:
        pytest.fail(f"never ready:\n{server.output()}")
    # Each pool worker says it is ready before it can answer the ping readiness waits for.
    at_ready = server.log.read_text(errors="replace")
    assert at_ready.count(" ready.") == QUEUE_COUNT, at_ready
    assert seen_waiting, "the API listened only once its workers were up: readiness was never seen waiting"

    output = wait_for_output(server, KEY_COMMAND, START_TIMEOUT)
    assert f"console:  {server.url}/console/" in output
    assert f"GraphiQL: {server.url}/graphql" in output
    assert f"API:      {server.url}{API}" in output
    assert output.count("console:") == 1
    # Said once everything is ready: after every pool worker's own "ready".
    assert output.rindex(" ready.") < output.index("console:")
    # Nothing says a Redis server is involved: the broker is inside serve.
    assert "redis://" not in output, output
    assert "Connected to the embedded broker of serve" in output

    # Each queue's pool worker is listed with the jobs it runs at once, though an idle one has no
    # pool process yet.
    listed = subprocess.run(
        [*cli_command(), "processes", "--json"],
        cwd=server.cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    pools = {p["queues"][0]: p for p in json.loads(listed.stdout) if p["kind"] == "POOL"}
    assert {q: (p["status"], p["concurrency"]) for q, p in pools.items()} == {
        q: ("ONLINE", n) for q, n in DEFAULT_QUEUES.items()
    }, listed.stdout
