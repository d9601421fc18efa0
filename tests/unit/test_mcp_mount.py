"""``/mcp`` is built by its first request: an API process that is never asked for it does not
load the MCP SDK."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx

from worker_automation.mcp.mount import LazyMcp
from worker_automation.resolvers.auth import MSG_MISSING
from worker_automation.resolvers.services import Services


def test_building_the_app_loads_no_mcp_module() -> None:
    code = (
        "import sys\n"
        "from worker_automation.asgi.app import create_app\n"
        "create_app()\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


async def _no_services() -> Services:
    raise AssertionError("no tool is called here")


async def test_a_request_after_the_app_stopped_is_refused_and_builds_nothing() -> None:
    mount = LazyMcp(_no_services)
    async with mount.run():
        pass
    transport = httpx.ASGITransport(app=mount)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        answer = await client.post("/mcp", json={})
    assert answer.status_code == 503
    assert mount._app is None


async def test_concurrent_first_requests_build_one_server() -> None:
    mount = LazyMcp(_no_services)
    async with mount.run():
        apps = await asyncio.gather(*(mount._start() for _ in range(3)))
        assert apps[0] is not None
        assert all(app is apps[0] for app in apps)
    assert mount._app is None


async def test_a_request_without_a_key_is_refused_before_the_server_is_built() -> None:
    mount = LazyMcp(_no_services)
    async with mount.run():
        transport = httpx.ASGITransport(app=mount)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            answer = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert answer.status_code == 401
        assert answer.json()["message"] == MSG_MISSING
        assert mount._app is None
