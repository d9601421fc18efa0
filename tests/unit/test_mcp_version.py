"""An MCP client sees the installed package's version in the server's info."""

from __future__ import annotations

from importlib.metadata import version

from mcp import Client

from worker_automation.mcp.server import SERVER_NAME, build_server
from worker_automation.resolvers.services import Services


async def _no_services() -> Services:
    raise AssertionError("no tool is called here")


async def test_the_server_reports_the_package_version() -> None:
    server = build_server(_no_services, lambda _ctx: None)
    async with Client(server) as client:
        info = client.server_info
    assert info is not None
    assert info.name == SERVER_NAME
    assert info.version == version("worker-automation") != ""
