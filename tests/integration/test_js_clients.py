"""The JavaScript GraphQL clients frontends use, against a real ``worker-automation serve``.

Apollo Client over HTTP (query, mutation, normalized cache), Apollo over ``graphql-ws`` and over the
legacy ``subscriptions-transport-ws`` (a job's terminal event, live), and ``buildClientSchema`` over
graphql-js's standard introspection query (the schema ``schema.graphql`` exports, nothing less).
They are pinned by ``tests/js/package-lock.json``; the Node script prints one JSON line per check,
and each check is a test here, so a failure names the client and the step. Without Node or
``tests/js/node_modules`` (``npm ci`` there) the tests are skipped, except under
``WA_REQUIRE_SERVICES=1``, where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import (
    OPERATOR_SCOPES,
    clean_env,
    cli_command,
    free_port,
    managed_processes,
    run_cli,
    wait_ready,
)

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SCRIPT = "run_clients.mjs"
# Under the per-check deadlines of the script (60 s each), with room for a slow start of the pool.
RUN_TIMEOUT = 240.0

CHECKS = (
    "http_query",
    "http_mutation",
    "normalized_cache",
    "graphql_ws_live_event",
    "graphql_ws_task_status",
    "legacy_ws_live_event",
    "legacy_ws_task_status",
    "client_schema",
)


@dataclass(frozen=True)
class ClientRun:
    """What the Node script printed: its checks by name, its exit code and its error output."""

    checks: dict[str, dict[str, Any]]
    lines: list[dict[str, Any]]
    returncode: int
    stderr: str


def _require_node() -> str:
    """The ``node`` binary; skip (or fail under WA_REQUIRE_SERVICES=1) when it or the packages are missing."""
    node = shutil.which("node")
    if node is None:
        reason = "node is not installed (apt-get install nodejs npm)"
    elif not (JS_DIR / "node_modules").is_dir():
        reason = f"{JS_DIR / 'node_modules'} is missing (npm ci in {JS_DIR})"
    else:
        return node
    if os.environ.get("WA_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} and WA_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(reason)


def _parse(stdout: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for text in stdout.splitlines():
        if text.strip():
            lines.append(json.loads(text))
    return lines


@pytest.fixture(scope="module")
def client_run(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ClientRun]:
    """``serve`` with zero setup but its own SQLite file and port, an operator key, one run of the clients."""
    node = _require_node()
    workdir = tmp_path_factory.mktemp("js-clients")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = clean_env(WA_DATABASE_URL=f"sqlite+aiosqlite:///{workdir / 'wa.db'}")
    with managed_processes(workdir / "logs", request.session) as procs:
        serve = procs.start("serve", [*cli_command(), "serve", "--port", str(port)], env, workdir)
        wait_ready(url, serve)
        key = run_cli(
            ["keys", "create", "--perfil", "administrador", "--scopes", OPERATOR_SCOPES], env, workdir
        )
        done = subprocess.run(
            [node, SCRIPT, "--url", url, "--key", key],
            cwd=JS_DIR,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
        lines = _parse(done.stdout)
        yield ClientRun({line["check"]: line for line in lines}, lines, done.returncode, done.stderr)


@pytest.mark.parametrize("name", CHECKS)
def test_client_check_passes(client_run: ClientRun, name: str) -> None:
    line = client_run.checks.get(name)
    assert line is not None, f"{name} was not reported; stderr:\n{client_run.stderr[-4000:]}"
    assert line["status"] == "pass", f"{name}: {line['detail']}"


def test_client_run_reports_every_check_and_exits_zero(client_run: ClientRun) -> None:
    names = [line["check"] for line in client_run.lines]
    assert names == list(CHECKS), f"checks reported: {names}; stderr:\n{client_run.stderr[-4000:]}"
    assert client_run.returncode == 0, f"exit {client_run.returncode}; stderr:\n{client_run.stderr[-4000:]}"
