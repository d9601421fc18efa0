"""A database that stops answering is an outage: 503 with Retry-After (REST) and
SERVICE_UNAVAILABLE (GraphQL), never a 500."""

from __future__ import annotations

import asyncpg
import httpx
import pytest

from tests.services import PG_HOST, PG_PORT, PG_USER
from worker_automation.app import create_app
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, create_key
from worker_automation.services import Services

pytestmark = pytest.mark.services


async def test_database_down_answers_503(services: Services) -> None:
    key = await create_key(
        services.db, name="admin", perfil="administrador", scopes=[SCOPE_READ, SCOPE_WRITE]
    )
    headers = {"X-API-Key": key.secret}
    app = create_app(services.settings)
    database = services.settings.database_url.rsplit("/", 1)[1]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            assert (await http.get("/api/v1/worker-automation/stats", headers=headers)).status_code == 200
            admin = await asyncpg.connect(f"postgresql://{PG_USER}@{PG_HOST}:{PG_PORT}/postgres")
            try:
                # The database closes: its connections are cut and new ones refused.
                await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", database
                )
                for path in ("/api/v1/worker-automation/stats", "/api/v1/worker-automation/?page=1"):
                    answer = await http.get(path, headers=headers)
                    assert answer.status_code == 503, (path, answer.text)
                    assert answer.headers["Retry-After"].isdigit()
                    assert answer.json()["status"] == "error" and answer.json()["data"] is None
                body = {"automation_type": "demo.echo", "context": {}}
                assert (await http.post("/api/v1/jobs", json=body, headers=headers)).status_code == 503
                graphql = await http.post("/graphql", json={"query": "{ stats { total } }"}, headers=headers)
                # Refused before execution (the key could not be checked): 503 in GraphQL's shape.
                assert graphql.status_code == 503 and graphql.headers["Retry-After"].isdigit()
                (error,) = graphql.json()["errors"]
                assert error["extensions"]["code"] == "SERVICE_UNAVAILABLE"
            finally:
                await admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
                await admin.close()
            # Back: the same process answers again.
            assert (await http.get("/api/v1/worker-automation/stats", headers=headers)).status_code == 200
