"""wa_job_wait_seconds is observed by a claim (creation to claim, by queue); wa_retries_total
counts automatic retries only."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from tests.integration.operator_support import any_services, pool_machine
from tests.unit.graphql_support import make_api
from worker_automation.domain.errors import Conflict
from worker_automation.infra.metrics import count_retry
from worker_automation.models import utcnow
from worker_automation.resolvers import claims
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]


def _sample(name: str, labels: dict[str, str]) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_claim_observes_the_wait_of_its_queue(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    machine = await pool_machine(services)
    before = _sample("wa_job_wait_seconds_count", {"queue": "scan"})
    before_sum = _sample("wa_job_wait_seconds_sum", {"queue": "scan"})
    job = await api.dispatch("demo.echo")
    created = utcnow()
    await claims.claim(services, machine, job["id"])
    waited = (utcnow() - created).total_seconds()
    assert _sample("wa_job_wait_seconds_count", {"queue": "scan"}) == before + 1
    observed = _sample("wa_job_wait_seconds_sum", {"queue": "scan"}) - before_sum
    assert 0 <= observed <= waited + 1.0
    # A refused claim (the job is already running) observes nothing.
    other = await pool_machine(services, name="pool-scan-2")
    with pytest.raises(Conflict):
        await claims.claim(services, other, job["id"])
    assert _sample("wa_job_wait_seconds_count", {"queue": "scan"}) == before + 1


def test_retries_are_counted_by_automation() -> None:
    before = _sample("wa_retries_total", {"automation": "demo.echo"})
    count_retry("demo.echo")
    assert _sample("wa_retries_total", {"automation": "demo.echo"}) == before + 1
