"""A long subscription keeps nothing per event once the event has been pushed."""

from __future__ import annotations

from typing import cast
from zoneinfo import ZoneInfo

from graphql import parse
from strawberry import Schema

from worker_automation.broker.events import Event
from worker_automation.schema import build_schema
from worker_automation.schema.sharing import SharedExecutionContext
from worker_automation.schema.types import WorkerEvent
from worker_automation.settings import Settings
from worker_automation.vocabulary import EventKind

QUERY = "subscription { workerEvents { kind worker { id status } } }"


def event(n: int) -> WorkerEvent:
    row = {
        "id": n, "status": "AGENDADO", "automation_type": "demo.echo", "queue": "scan",
        "created_at": "2026-07-08T12:00:00+00:00", "updated_at": "2026-07-08T12:00:00+00:00",
    }  # fmt: skip
    return WorkerEvent.from_event(Event(kind=EventKind.CREATED, worker=row), ZoneInfo("UTC"))


def test_each_event_is_executed_with_a_memo_of_its_own(sqlite_database_url: str) -> None:
    schema = cast(Schema, build_schema(Settings(database_url=sqlite_database_url)))
    subscription = SharedExecutionContext.build(schema._schema, parse(QUERY))
    assert isinstance(subscription, SharedExecutionContext)
    for n in range(50):
        result = subscription.build_per_event_executor(event(n)).execute_operation()
        assert result.data == {"workerEvents": {"kind": "CREATED", "worker": {"id": n, "status": "AGENDADO"}}}
    # graphql-core's per-event executors are copies of the subscription's: a memo shared with
    # them would hold two entries per event here, for as long as the subscription lives.
    assert subscription._relevant_sub_fields == {}
