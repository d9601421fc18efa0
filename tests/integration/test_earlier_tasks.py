"""A task id its job no longer holds (the job was retried, moved or sent again under a new one) is
answered from the run it named, on SQLite and PostgreSQL: a failed run stays FAILURE for whoever
polls it, a run put back in the queue is REVOKED naming the task that replaced it. An id no job
ever ran under still comes from Celery's result backend, and while the broker cannot be read the
answer is 503, not "not found"."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.operator_support import any_services, pool_machine
from tests.integration.test_worker_protocol_bad_input import Api, assert_error, broker_down
from tests.unit.graphql_support import make_api
from worker_automation.domain.errors import NotFound
from worker_automation.resolvers import claims, job_actions, live
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.services import Services

__all__ = ["any_services", "broker_down"]

BASE = "/api/v1/worker-automation"


async def _running(services: Services) -> tuple[MachineView, dict[str, Any]]:
    """A pool machine and a demo.echo job it has claimed."""
    api = await make_api(services)
    machine = await pool_machine(services)
    job = await api.dispatch("demo.echo")
    await claims.claim(services, machine, job["id"], job["taskId"])
    return machine, job


async def test_a_failed_run_keeps_its_failure_after_the_job_is_retried(any_services: Services) -> None:
    services = any_services
    machine, job = await _running(services)
    await claims.fail(services, machine, job["id"], "portal fora do ar")
    retried = await job_actions.retry(services, CLI_ACTOR, job["id"])
    assert retried.task_id != job["taskId"]
    old = await live.task_status(services, job["taskId"])
    assert old.state == "FAILURE"
    assert old.result == {
        "exc_type": "AutomationError",
        "exc_message": "portal fora do ar",
        "traceback": None,
    }
    assert old.job is not None and old.job.id == job["id"] and old.job.status == "AGENDADO"
    current = await live.task_status(services, str(retried.task_id))
    assert current.state == "PENDING"


async def test_a_run_moved_back_to_the_queue_names_its_new_task(any_services: Services) -> None:
    services = any_services
    _, job = await _running(services)
    moved = await job_actions.move(services, CLI_ACTOR, job["id"], "observer")
    old = await live.task_status(services, job["taskId"])
    assert old.state == "REVOKED"
    assert old.result == {
        "exc_type": "TaskRevokedError",
        "exc_message": f"Task substituida por {moved.task_id}",
    }


async def test_an_id_no_job_ran_under_is_still_not_found(any_services: Services) -> None:
    with pytest.raises(NotFound):
        await live.task_status(any_services, "nenhuma-task")


async def test_the_broker_down_is_503_for_an_id_without_a_row(broker_down: Api) -> None:
    body = assert_error(
        await broker_down.http.get(f"{BASE}/status/nenhuma-task", headers=broker_down.operator), 503
    )
    assert "127.0.0.1" not in str(body) and "Connection" not in str(body)
