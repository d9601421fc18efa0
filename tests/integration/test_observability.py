"""``serve --workers 2`` observed from outside: metrics that add up across its processes after real
jobs run by a real pool worker, JSON log lines carrying the request id, no access line per
progress report, and the MCP tools over streamable HTTP and stdio answering what REST answers."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.integration.harness import Processes, Stack, cli_command, run_cli, served_stack, wait_until
from worker_automation.resolvers.auth import MSG_INVALID, MSG_MISSING

pytestmark = pytest.mark.services

ECHOES = 6
BASE = "/api/v1/worker-automation"
# Label values may hold braces themselves (route templates).
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")


@pytest.fixture
def observed(
    processes: Processes, pg_database_url: str, redis_url: str, redis_prefix: str, tmp_path: Path
) -> Iterator[Stack]:
    """``serve --workers 2`` logging JSON."""
    with served_stack(
        processes,
        pg_database_url,
        redis_url,
        redis_prefix,
        tmp_path,
        workers=2,
        serve_env={"WA_LOG_FORMAT": "json"},
    ) as built:
        yield built


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    found = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            labels = frozenset(re.findall(r'(\w+)="([^"]*)"', match.group("labels") or ""))
            found[(match.group("name"), labels)] = float(match.group("value"))
    return found


def value(found: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


def server_pids(stack: Stack) -> list[int]:
    assert stack.serve_proc is not None
    return [int(pid) for pid in re.findall(r"Started server process \[(\d+)\]", stack.serve_proc.output())]


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    """``pid`` stopped: the other API process accepts every new connection meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def scrape_each_process(stack: Stack) -> list[dict[tuple[str, frozenset[tuple[str, str]]], float]]:
    """One scrape answered by each API process (the other one paused meanwhile)."""
    pids = server_pids(stack)
    assert len(pids) == 2, pids
    scrapes = []
    for other in pids:
        with paused(other), httpx.Client(base_url=stack.api_url, timeout=10) as fresh:
            scrapes.append(samples(fresh.get("/metrics").text))
    return scrapes


def test_metrics_logs_and_mcp_across_two_processes(observed: Stack, tmp_path: Path) -> None:
    stack = observed
    worker = stack.pool_worker("scan", concurrency=2)
    echo_ids = [stack.dispatch("demo.echo", {"n": i}) for i in range(ECHOES)]
    sleep_id = stack.dispatch("demo.sleep", {"seconds": 1.5})
    fail_id = stack.dispatch("demo.fail", {"message": "boom"})
    for job_id in echo_ids:
        stack.wait_status(job_id, "CONCLUIDO", 30)
    stack.wait_status(sleep_id, "CONCLUIDO", 30)
    stack.wait_status(fail_id, "FALHA", 30)
    assert worker.alive()

    # --- metrics: the same totals whichever process answers ---------------------------------
    scrapes = scrape_each_process(stack)
    for found in scrapes:
        echo = {"automation": "demo.echo", "queue": "scan"}
        assert value(found, "wa_job_transitions_total", status="AGENDADO", **echo) == ECHOES
        assert value(found, "wa_job_transitions_total", status="EXECUTANDO", **echo) == ECHOES
        assert value(found, "wa_job_transitions_total", status="CONCLUIDO", **echo) == ECHOES
        assert (
            value(found, "wa_job_transitions_total", automation="demo.fail", queue="scan", status="FALHA")
            == 1
        )
        assert value(found, "wa_job_duration_seconds_count", automation="demo.echo") == ECHOES
        assert value(found, "wa_job_duration_seconds_count", automation="demo.fail") == 1
        assert value(found, "wa_job_duration_seconds_bucket", automation="demo.sleep", le="1.0") == 0
        assert value(found, "wa_job_duration_seconds_bucket", automation="demo.sleep", le="+Inf") == 1
        assert value(found, "wa_job_duration_seconds_sum", automation="demo.sleep") >= 1.5
        starts = value(
            found,
            "wa_http_request_duration_seconds_count",
            route="/api/v1/jobs/{job_id}/start",
            method="POST",
            status="200",
        )
        assert starts == ECHOES + 2
        progress = [
            v
            for (name, labels), v in found.items()
            if name == "wa_http_request_duration_seconds_count"
            and ("route", "/api/v1/jobs/{job_id}/progress") in labels
        ]
        assert sum(progress) >= 1
        assert value(found, "wa_queue_length", queue="scan") == 0
        assert value(found, "wa_subscribers") == 0
        assert value(found, "process_resident_memory_bytes") > 0
    # Raw paths never become labels.
    stack.http.get("/no/such/path/12345")
    text = httpx.get(f"{stack.api_url}/metrics").text
    assert "12345" not in text
    # A refused claim is counted under its reason.
    machine_key = stack.register_machine(automation="demo.echo", name="refuser")
    refused = stack.http.post(
        f"/api/v1/jobs/{sleep_id}/start", headers={"X-Worker-Api-Key": machine_key}, json={}
    )
    assert refused.status_code == 409
    reason = refused.json()["data"]["reason"]
    assert any(
        value(samples(httpx.get(f"{stack.api_url}/metrics").text), "wa_claims_refused_total", reason=reason)
        == 1
        for _ in range(4)
    )

    # --- logs: JSON lines with the request id; no access line per progress report ------------
    response = stack.http.get(
        f"{BASE}/stats", headers={**stack.operator_headers, "X-Request-ID": "trace-abc.123"}
    )
    assert response.headers["x-request-id"] == "trace-abc.123"
    generated = stack.http.get("/healthz", headers={"X-Request-ID": "bad id\twith spaces"}).headers[
        "x-request-id"
    ]
    assert generated and " " not in generated and generated != "bad id\twith spaces"
    serve_proc = stack.serve_proc
    assert serve_proc is not None
    wait_until(lambda: "trace-abc.123" in serve_proc.output(), 10, "the request's line was not logged")
    lines = [json.loads(line) for line in serve_proc.output().splitlines() if line.startswith("{")]
    assert lines and all({"time", "level", "logger", "message", "request_id"} <= set(line) for line in lines)
    mine = [line for line in lines if line["request_id"] == "trace-abc.123"]
    assert mine and "/stats" in mine[0]["message"]
    assert not [line for line in lines if "/progress" in line["message"]]

    # --- MCP over streamable HTTP and stdio: what REST answers ---------------------------------
    reader = run_cli(
        ["keys", "create", "--perfil", "funcionario", "--scopes", "worker_automation:read"],
        stack.env,
        stack.workdir,
    )
    writer = stack.operator_headers["X-API-Key"]
    task_id = stack.rest_job(echo_ids[0])["task_id"]
    rest = {
        "status": stack.http.get(f"{BASE}/status/{task_id}", headers=stack.operator_headers).json()["data"],
        "list": stack.http.get(f"{BASE}/?status=CONCLUIDO&per_page=5", headers=stack.operator_headers).json()[
            "data"
        ],
        "search": stack.http.get(f"{BASE}/search-automations?q=echo", headers=stack.operator_headers).json()[
            "data"
        ],
    }
    import anyio

    http_answers = anyio.run(mcp_over_http, f"{stack.api_url}/mcp", writer, reader, task_id, fail_id)
    stdio_env = {k: v for k, v in stack.env.items() if k != "WA_API_URL"}
    stdio_answers = anyio.run(mcp_over_stdio, stdio_env, writer, reader, task_id, stack.workdir)
    for answers in (http_answers, stdio_answers):
        assert answers["status"] == rest["status"]
        assert answers["list"] == rest["list"]
        assert answers["search"] == rest["search"]
        assert answers["tools"] == {
            "consultar_status_task",
            "listar_workers",
            "resumo_dashboard",
            "buscar_automacoes",
            "disparar_automacao",
            "cancelar_worker",
            "retentar_worker",
        }
        assert answers["dashboard"]["stats"]["total"] >= ECHOES
        assert "FORBIDDEN: API Key sem o escopo worker_automation:write" in answers["read_only_write"]
        assert "NOT_FOUND" in answers["unknown_job"], answers["unknown_job"]
    retried = http_answers["retried"]
    assert (retried["id"], retried["status"], retried["retry_count"]) == (fail_id, "AGENDADO", 1)
    assert stack.rest_job(fail_id)["retry_count"] == 1
    no_entry = anyio.run(mcp_unauthenticated, f"{stack.api_url}/mcp")
    assert no_entry == [(401, MSG_INVALID), (401, MSG_MISSING)], no_entry

    # serve stopped as a supervisor stops it removes its processes' metrics directory.
    environ = Path(f"/proc/{server_pids(stack)[0]}/environ").read_bytes().split(b"\0")
    metrics_dir = Path(
        next(v for v in environ if v.startswith(b"PROMETHEUS_MULTIPROC_DIR=")).split(b"=", 1)[1].decode()
    )
    assert any(metrics_dir.glob("counter_*.db"))
    assert stack.serve_proc is not None
    stack.serve_proc.send(signal.SIGTERM)
    assert stack.serve_proc.wait(30) is not None
    assert not metrics_dir.exists()


async def call(session: ClientSession, name: str, arguments: dict[str, Any] | None = None) -> Any:
    result = await session.call_tool(name, arguments or {})
    if result.is_error:
        content = result.content[0]
        assert isinstance(content, TextContent), content
        return content.text
    assert result.structured_content is not None, result
    return result.structured_content


async def exercise(session: ClientSession, task_id: str) -> dict[str, Any]:
    await session.initialize()
    tools = {tool.name for tool in (await session.list_tools()).tools}
    return {
        "tools": tools,
        "status": await call(session, "consultar_status_task", {"task_id": task_id}),
        "list": await call(session, "listar_workers", {"status": "CONCLUIDO", "per_page": 5}),
        "search": await call(session, "buscar_automacoes", {"q": "echo"}),
        "dashboard": await call(session, "resumo_dashboard"),
        "unknown_job": await call(session, "cancelar_worker", {"id": 99999}),
    }


async def read_only_write(session: ClientSession) -> str:
    await session.initialize()
    answer = await call(session, "disparar_automacao", {"automation_type": "demo.echo", "context": {}})
    assert isinstance(answer, str), answer
    return answer


async def mcp_over_http(url: str, writer: str, reader: str, task_id: str, fail_id: int) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": writer}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        answers = await exercise(session, task_id)
        answers["retried"] = await call(session, "retentar_worker", {"id": fail_id})
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {reader}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        answers["read_only_write"] = await read_only_write(session)
    return answers


async def mcp_unauthenticated(url: str) -> list[tuple[int, str]]:
    """What ``/mcp`` answers a first message with an unknown key, and without one: REST's 401."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    answers = []
    async with httpx2.AsyncClient(timeout=30) as http:
        for headers in ({"X-API-Key": "nope"}, {}):
            answer = await http.post(url, json=initialize, headers=headers)
            answers.append((answer.status_code, str(answer.json()["message"])))
    return answers


async def mcp_over_stdio(
    env: dict[str, str], writer: str, reader: str, task_id: str, cwd: Path
) -> dict[str, Any]:
    command = cli_command()
    server = StdioServerParameters(
        command=command[0], args=[*command[1:], "mcp"], env={**env, "WA_API_KEY": writer}, cwd=cwd
    )
    async with (
        stdio_client(server, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        answers = await exercise(session, task_id)
    read_only = StdioServerParameters(
        command=command[0], args=[*command[1:], "mcp", "--api-key", reader], env=env, cwd=cwd
    )
    async with (
        stdio_client(read_only, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        answers["read_only_write"] = await read_only_write(session)
    return answers
