"""What the operator console relies on, in-process: its files served by the app, nothing fetched
from elsewhere, the size budget, ``viewer`` telling a key's permissions, and broker lengths per
priority."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import httpx
import pytest

from tests.unit.graphql_support import Api, code, make_api
from worker_automation.asgi.app import create_app
from worker_automation.console.routes import STATIC_DIR
from worker_automation.resolvers.services import Services
from worker_automation.settings import Settings

BUDGET_BYTES = 250 * 1024
# Anything a page could load from another origin: absolute URLs in imports, src/href or url().
EXTERNAL = re.compile(r"""(?:(?:from|import)\s*\(?\s*["']|(?:src|href)=["']?|url\(["']?)(?:https?:)?//""")


@pytest.fixture
async def api(sqlite_services: Services) -> Api:
    return await make_api(sqlite_services)


async def test_root_redirects_to_the_console_and_its_files_are_served_compressed(
    sqlite_database_url: str,
) -> None:
    app = create_app(Settings(database_url=sqlite_database_url))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        root = await client.get("/")
        assert root.status_code == 307 and root.headers["location"] == "/console/"
        page = await client.get("/console/")
        assert page.status_code == 200 and 'lang="pt-BR"' in page.text
        assert page.headers["cache-control"] == "no-cache"
        script = await client.get("/console/js/app.js", headers={"Accept-Encoding": "gzip"})
        assert script.status_code == 200 and script.headers["content-encoding"] == "gzip"
        assert "javascript" in script.headers["content-type"]
        assert (await client.get("/console/nope.js")).status_code == 404
        # The API's own answers are not touched by the console's compression.
        assert "content-encoding" not in (await client.get("/healthz")).headers


def test_the_console_loads_nothing_from_outside_the_service() -> None:
    files = [p for p in STATIC_DIR.rglob("*") if p.suffix in {".html", ".js", ".mjs", ".css"}]
    assert len(files) > 10
    offenders = [str(p.relative_to(STATIC_DIR)) for p in files if EXTERNAL.search(p.read_text())]
    assert offenders == []


def test_the_console_ships_at_most_250_kib_of_js_and_css_gzipped() -> None:
    shipped = [p for p in STATIC_DIR.rglob("*") if p.suffix in {".js", ".mjs", ".css"}]
    total = sum(len(gzip.compress(p.read_bytes(), compresslevel=9)) for p in shipped)
    assert total <= BUDGET_BYTES, f"{total / 1024:.1f} KiB"


def test_every_vendored_library_keeps_its_licence_and_version() -> None:
    vendored = [p for p in (STATIC_DIR / "vendor").iterdir() if p.is_dir()]
    assert {p.name for p in vendored} == {"preact", "htm", "graphql-ws", "uplot"}
    for folder in vendored:
        assert (folder / "LICENSE").stat().st_size > 100, folder
        assert (folder / "VERSION").read_text().startswith(f"{folder.name}@"), folder
    assert Path(STATIC_DIR.parent.parent.parent, "scripts", "vendor_console.py").exists()


async def test_viewer_tells_each_key_what_it_may_do(api: Api) -> None:
    query = "{ viewer { name perfil scopes canRead canWrite canManage timezone } }"
    admin = (await api.ok(query, caller="admin"))["viewer"]
    assert admin == {
        "name": "admin",
        "perfil": "administrador",
        "scopes": ["worker_automation:read", "worker_automation:write"],
        "canRead": True,
        "canWrite": True,
        "canManage": True,
        "timezone": "America/Sao_Paulo",
    }
    operator = (await api.ok(query, caller="operator"))["viewer"]
    assert (operator["canWrite"], operator["canManage"]) == (True, False)
    reader = (await api.ok(query, caller="reader"))["viewer"]
    assert (reader["canRead"], reader["canWrite"], reader["canManage"]) == (True, False, False)
    assert code(await api.fails(query, caller=None)) == "UNAUTHENTICATED"
    assert code(await api.fails(query, caller="wak_unknown")) == "UNAUTHENTICATED"


async def test_broker_lengths_per_priority(api: Api) -> None:
    for priority in (0, 3, 3):
        await api.dispatch("demo.echo", priority=priority)
    data = await api.ok("{ brokerStatus { available queues priorityLengths { queue priority count } } }")
    status = data["brokerStatus"]
    assert status["available"] is True
    scan = [(p["priority"], p["count"]) for p in status["priorityLengths"] if p["queue"] == "scan"]
    assert scan == [(0, 1), (3, 2)]
    assert status["queues"]["scan"] == 3
