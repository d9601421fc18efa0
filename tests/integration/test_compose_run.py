"""compose.yaml's services run as compose would run them, in the documented order, against the
real PostgreSQL and Redis: bootstrap (migrate, pool machines, key files), the API, one pool
worker reading its key from the file, and a job that runs to the end. Only the addresses change
(``postgres``, ``redis`` and ``api`` become this machine's) and the volumes become directories."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.integration.harness import (
    OPERATOR_SCOPES,
    Processes,
    clean_env,
    cli_command,
    free_port,
    run_cli,
    wait_ready,
    wait_until,
)
from worker_automation.settings import Settings

pytestmark = pytest.mark.services

ROOT = Path(__file__).resolve().parents[2]
STEP_TIMEOUT = 30.0


class Compose:
    """compose.yaml's services, turned into command lines and environments for this machine."""

    def __init__(self, tmp_path: Path, database_url: str, redis_url: str, redis_prefix: str) -> None:
        self.services: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]
        self.port = free_port()
        self.api_url = f"http://127.0.0.1:{self.port}"
        self.database_url = database_url
        self.redis_url = redis_url
        self.redis_prefix = redis_prefix
        self.volumes: dict[str, Path] = {}
        self.tmp_path = tmp_path

    def _volume_dir(self, name: str) -> Path:
        if name not in self.volumes:
            self.volumes[name] = self.tmp_path / f"volume-{name}"
            self.volumes[name].mkdir()
        return self.volumes[name]

    def _paths(self, service: dict[str, Any]) -> dict[str, str]:
        """Mount target in the container -> this test's directory for that volume."""
        found = {}
        for mount in service.get("volumes") or []:
            source, target = str(mount).split(":")[:2]
            found[target] = str(self._volume_dir(source))
        return found

    def _translate(self, value: str, paths: dict[str, str]) -> str:
        if "@postgres:" in value:
            return self.database_url
        value = value.replace("redis://redis:6379/0", self.redis_url)
        value = value.replace("http://api:8000", self.api_url)
        for target, directory in paths.items():
            if value == target or value.startswith(target + "/"):
                value = directory + value[len(target) :]
        return value

    def command(self, name: str) -> list[str]:
        service = self.services[name]
        paths = self._paths(service)
        command = [self._translate(str(part), paths) for part in service["command"]]
        assert command[0] == "worker-automation"
        if name == "api":
            command[command.index("--port") + 1] = str(self.port)
        return [*cli_command(), *command[1:]]

    def env(self, name: str) -> dict[str, str]:
        service = self.services[name]
        paths = self._paths(service)
        env = clean_env(
            **{k: self._translate(str(v), paths) for k, v in (service.get("environment") or {}).items()}
        )
        # Not compose's: keeps this test's event channel apart from other tests on the same Redis.
        env["WA_REDIS_PREFIX"] = self.redis_prefix
        return env


def test_compose_first_run_in_documented_order(
    processes: Processes, pg_database_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    compose = Compose(tmp_path, pg_database_url, redis_url, redis_prefix)
    workdir = tmp_path / "work"
    workdir.mkdir()

    # 1. bootstrap: migrate, one machine per queue, its key in the shared volume.
    bootstrap = subprocess.run(
        compose.command("bootstrap"),
        env=compose.env("bootstrap"),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bootstrap.returncode == 0, bootstrap.stdout + bootstrap.stderr
    keys_dir = compose.volumes["keys"]
    keys = {q: (keys_dir / f"{q}.key").read_text().strip() for q in Settings().queues}
    assert all(key.startswith("wmk_") for key in keys.values()), keys
    assert len(set(keys.values())) == len(keys)

    # 2. the API (serve --workers 2), ready by its compose health check too.
    api = processes.start("api", compose.command("api"), compose.env("api"), workdir)
    wait_ready(compose.api_url, api)
    check = [
        str(part).replace("8000", str(compose.port))
        for part in compose.services["api"]["healthcheck"]["test"]
    ]
    assert check[0] == "CMD"
    assert subprocess.run(check[1:], timeout=30, check=False).returncode == 0

    # 3. one pool worker, its key read from the file bootstrap wrote.
    worker_env = compose.env("worker-scan")
    assert "WA_WORKER_API_KEY" not in worker_env and "WA_DATABASE_URL" not in worker_env
    worker = processes.start("worker-scan", compose.command("worker-scan"), worker_env, workdir)
    worker.wait_for_output(" ready.")

    # 4. a job runs.
    operator = run_cli(
        ["keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES],
        compose.env("api"),
        workdir,
    )
    with httpx.Client(base_url=compose.api_url, headers={"X-API-Key": operator}, timeout=15) as http:
        created = http.post(
            "/api/v1/jobs",
            json={"automation_type": "demo.echo", "context": {"hello": "compose"}, "priority": 0},
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["data"]["id"]

        def finished() -> dict[str, Any] | None:
            data: dict[str, Any] = http.get(f"/api/v1/worker-automation/{job_id}").json()["data"]
            return data if data["status"] in ("CONCLUIDO", "FALHA") else None

        done = wait_until(finished, STEP_TIMEOUT, lambda: f"job {job_id} never finished:\n{worker.tail()}")
        assert done["status"] == "CONCLUIDO", done

    # 5. bootstrap again (every `up` runs it): the working keys are kept.
    again = subprocess.run(
        compose.command("bootstrap"),
        env=compose.env("bootstrap"),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count(" kept,") == len(keys), again.stdout
    assert {q: (keys_dir / f"{q}.key").read_text().strip() for q in keys} == keys
