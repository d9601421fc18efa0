"""Dispatch idempotency keys on SQLite (embedded broker) and PostgreSQL (real Redis): a request sent
again with its key gets the job the first one made, whatever the transport, at once or later, and
nothing is created, sent or announced twice."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import delete, func, select, update

from tests.integration.operator_support import any_services
from tests.unit.graphql_support import code, make_api
from worker_automation.domain.errors import BadInput, Conflict
from worker_automation.models import AuditEntry, DispatchKey, Job
from worker_automation.resolvers.audit import CLI_ACTOR
from worker_automation.resolvers.dispatch import (
    JobRequest,
    dispatch_keyed,
    dispatch_many_keyed,
    record_only,
)
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]

DISPATCH = "mutation($input: DispatchInput!) { dispatchAutomation(input: $input) { id status taskId } }"


def echo(key: str | None, n: int = 1, **fields: Any) -> JobRequest:
    return JobRequest("demo.echo", fields.get("cliente_id"), {"n": n}, fields.get("priority", 0), None, key)


async def jobs(services: Services) -> int:
    async with services.db.session() as session:
        return int(await session.scalar(select(func.count()).select_from(Job)) or 0)


async def keys(services: Services) -> dict[str, int]:
    async with services.db.session() as session:
        return {
            k: w for k, w in (await session.execute(select(DispatchKey.key, DispatchKey.worker_id))).all()
        }


async def scan_messages(services: Services) -> int:
    return (await services.broker.queue_lengths())["scan"]


async def test_the_same_key_twice_gives_the_first_job_and_sends_nothing_more(any_services: Services) -> None:
    services = any_services
    first = await dispatch_keyed(services, CLI_ACTOR, echo("pedido-1"))
    queued = await scan_messages(services)
    again = await dispatch_keyed(services, CLI_ACTOR, echo("pedido-1"))
    assert first.fresh == [True] and again.fresh == [False]
    assert again.views[0].id == first.views[0].id
    assert again.views[0].task_id == first.views[0].task_id
    assert await jobs(services) == 1
    assert await scan_messages(services) == queued, "the replay sent its task again"
    assert await keys(services) == {"pedido-1": first.views[0].id}
    async with services.db.session() as session:
        details = [
            d for (d,) in (await session.execute(select(AuditEntry.detail).order_by(AuditEntry.id))).all()
        ]
    assert details[-1] == {"replayed": [first.views[0].id]}
    # Without a key, or with another one, the same request makes a job each time.
    await dispatch_keyed(services, CLI_ACTOR, echo(None))
    await dispatch_keyed(services, CLI_ACTOR, echo("pedido-2"))
    assert await jobs(services) == 3


async def test_the_same_key_for_another_request_is_refused_and_changes_nothing(
    any_services: Services,
) -> None:
    services = any_services
    made = (await dispatch_keyed(services, CLI_ACTOR, echo("k", n=1))).views[0]
    for other in (
        echo("k", n=2),
        echo("k", n=1, priority=3),
        JobRequest("demo.sleep", None, {"seconds": 1}, 0, None, "k"),
    ):
        with pytest.raises(Conflict) as refused:
            await dispatch_keyed(services, CLI_ACTOR, other)
        assert "idempotency_key" in refused.value.message
        assert refused.value.details["worker_id"] == made.id
    assert await jobs(services) == 1


async def test_requests_racing_with_one_new_key_make_one_job(any_services: Services) -> None:
    services = any_services
    answers = await asyncio.gather(*(dispatch_keyed(services, CLI_ACTOR, echo("corrida")) for _ in range(8)))
    assert len({a.views[0].id for a in answers}) == 1
    assert sum(a.fresh[0] for a in answers) == 1
    assert await jobs(services) == 1


async def test_a_batch_replays_its_known_keys_and_creates_the_rest(any_services: Services) -> None:
    services = any_services
    first = await dispatch_many_keyed(services, CLI_ACTOR, [echo("a", 1), echo(None, 2), echo("b", 3)])
    assert first.fresh == [True, True, True]
    second = await dispatch_many_keyed(services, CLI_ACTOR, [echo("c", 4), echo("a", 1), echo(None, 5)])
    assert second.fresh == [True, False, True]
    assert second.views[1].id == first.views[0].id
    assert [v.context for v in second.views] == [{"n": 4}, {"n": 1}, {"n": 5}]
    assert await jobs(services) == 5
    with pytest.raises(BadInput) as repeated:
        await dispatch_many_keyed(services, CLI_ACTOR, [echo("d", 1), echo("d", 1)])
    assert repeated.value.field == "jobs[1].idempotency_key"
    with pytest.raises(Conflict):
        await dispatch_many_keyed(services, CLI_ACTOR, [echo("e", 1), echo("a", 9)])
    assert await jobs(services) == 5 and "e" not in await keys(services)


async def test_bad_keys_are_refused_naming_the_field(any_services: Services) -> None:
    for bad in ("", "x" * 256, "com\nquebra", "\x00", 42, ["k"], "\ud800"):
        with pytest.raises(BadInput) as refused:
            await dispatch_keyed(any_services, CLI_ACTOR, echo(bad))  # type: ignore[arg-type]
        assert refused.value.field == "idempotency_key", bad
    assert await jobs(any_services) == 0
    longest = "é" * 255
    assert (await dispatch_keyed(any_services, CLI_ACTOR, echo(longest))).fresh == [True]


async def test_a_key_lives_as_long_as_its_job(any_services: Services) -> None:
    services = any_services
    made = (await dispatch_keyed(services, CLI_ACTOR, echo("vida"))).views[0]
    async with services.db.session() as session:
        await session.execute(delete(Job).where(Job.id == made.id))
    assert await keys(services) == {}
    again = await dispatch_keyed(services, CLI_ACTOR, echo("vida"))
    assert again.fresh == [True] and again.views[0].task_id != made.task_id


async def test_a_replay_answers_even_once_the_automation_is_disabled(any_services: Services) -> None:
    services = any_services
    made = (await dispatch_keyed(services, CLI_ACTOR, echo("antes"))).views[0]
    api = await make_api(services)
    off = await api.run('mutation { updateAutomationSettings(key: "demo.echo", enabled: false) { enabled } }')
    assert off.errors is None and off.data == {"updateAutomationSettings": {"enabled": False}}
    again = await dispatch_keyed(services, CLI_ACTOR, echo("antes"))
    assert again.fresh == [False] and again.views[0].id == made.id
    with pytest.raises(Conflict):
        await dispatch_keyed(services, CLI_ACTOR, echo("depois"))


async def test_recorded_without_a_broker_then_replayed(any_services: Services) -> None:
    services = any_services
    first = await record_only(services.db, CLI_ACTOR, echo("sem-broker"))
    again = await record_only(services.db, CLI_ACTOR, echo("sem-broker"))
    assert first.fresh == [True] and again.fresh == [False]
    assert again.views[0].id == first.views[0].id and first.views[0].task_id is None


async def test_graphql_dispatch_takes_the_key(any_services: Services) -> None:
    api = await make_api(any_services)
    variables = {"input": {"automationType": "demo.echo", "context": {"n": 1}, "idempotencyKey": "gql-1"}}
    first = await api.run(DISPATCH, variables)
    again = await api.run(DISPATCH, variables)
    assert first.errors is None and again.errors is None
    assert first.data == again.data
    variables["input"]["context"] = {"n": 2}
    refused = await api.run(DISPATCH, variables)
    assert refused.errors and code(refused.errors[0]) == "CONFLICT"
    batch = await api.run(
        "mutation($inputs: [DispatchInput!]!) { dispatchAutomations(inputs: $inputs) { id } }",
        {"inputs": [{"automationType": "demo.echo", "context": {"n": 1}, "idempotencyKey": "gql-1"}]},
    )
    assert first.data is not None and batch.errors is None
    assert batch.data == {"dispatchAutomations": [{"id": first.data["dispatchAutomation"]["id"]}]}
    assert await jobs(any_services) == 1


async def test_a_kept_job_is_what_its_key_answers_when_the_broker_is_back(any_services: Services) -> None:
    """A dispatch whose task the broker refused keeps its row AGENDADO without a task; sent again
    with its key, the answer is that row, not a second job."""
    services = any_services
    made = await record_only(services.db, CLI_ACTOR, echo("guardado"))
    async with services.db.session() as session:
        await session.execute(update(Job).where(Job.id == made.views[0].id).values(task_id=None))
    again = await dispatch_keyed(services, CLI_ACTOR, echo("guardado"))
    assert again.fresh == [False] and again.views[0].id == made.views[0].id
    assert await jobs(services) == 1
