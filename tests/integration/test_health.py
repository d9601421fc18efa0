"""Health, readiness and metrics endpoints, with the broker up and with it down."""

from __future__ import annotations

import pytest

from tests.integration.rest_support import add_job, running_api
from tests.support.settings import MakeSettings

pytestmark = pytest.mark.services


async def test_health_ready_and_metrics(
    pg_database_url: str, redis_url: str, make_settings: MakeSettings
) -> None:
    async with running_api(make_settings(pg_database_url, redis_url)) as api:
        for status in ("AGENDADO", "AGENDADO", "CONCLUIDO"):
            await add_job(api.db, status)
        assert (await api.call("GET", "/healthz", kind=None)).json() == {"status": "ok"}
        ready = await api.call("GET", "/readyz", kind=None)
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"database": True, "broker": True}

        metrics = await api.call("GET", "/metrics", kind=None)
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain")
        text = metrics.text
        assert 'wa_jobs{queue="certidao",status="AGENDADO"} 2.0' in text
        assert 'wa_jobs{queue="certidao",status="CONCLUIDO"} 1.0' in text
        assert "wa_broker_up 1.0" in text
        assert 'wa_queue_length{queue="scan"} 0.0' in text


async def test_readyz_names_the_broker_when_redis_is_down(
    pg_database_url: str, make_settings: MakeSettings
) -> None:
    async with running_api(make_settings(pg_database_url, "redis://127.0.0.1:1/0")) as api:
        assert (await api.call("GET", "/healthz", kind=None)).status_code == 200
        ready = await api.call("GET", "/readyz", kind=None)
        assert ready.status_code == 503
        assert ready.json()["down"] == ["broker"]
        assert "wa_broker_up 0.0" in (await api.call("GET", "/metrics", kind=None)).text
