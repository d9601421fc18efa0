"""A long subscription keeps nothing per event once the event has been pushed.

These tests also pin what the execution context relies on in graphql-core and Strawberry (see
``pyproject.toml``): an upgrade that renames or stops calling what it overrides fails here.
"""

from __future__ import annotations

from typing import cast
from zoneinfo import ZoneInfo

from graphql import GraphQLSchema, parse
from strawberry import Schema

from worker_automation.broker.events import Event
from worker_automation.domain.vocabulary import EventKind
from worker_automation.overrides.plain_fields import PlainFieldsExecutionContext
from worker_automation.schema import build_schema
from worker_automation.schema.types import JobEvent
from worker_automation.settings import Settings

QUERY = "subscription { workerEvents { kind worker { id status } } }"


def event(n: int) -> JobEvent:
    row = {
        "id": n, "status": "AGENDADO", "automation_type": "demo.echo", "queue": "scan",
        "created_at": "2026-07-08T12:00:00+00:00", "updated_at": "2026-07-08T12:00:00+00:00",
    }  # fmt: skip
    return JobEvent.from_event(Event(kind=EventKind.CREATED, job=row), ZoneInfo("UTC"))


def graphql_schema(sqlite_database_url: str) -> GraphQLSchema:
    schema = cast(Schema, build_schema(Settings(database_url=sqlite_database_url)))
    # Strawberry's graphql-core schema, read here only: the test builds an executor by hand.
    found = schema._schema
    assert isinstance(found, GraphQLSchema)
    return found


def test_each_event_is_executed_with_a_memo_of_its_own(sqlite_database_url: str) -> None:
    subscription = PlainFieldsExecutionContext.build(graphql_schema(sqlite_database_url), parse(QUERY))
    assert isinstance(subscription, PlainFieldsExecutionContext)
    for n in range(50):
        executor = subscription.build_per_event_executor(event(n))
        result = executor.execute_operation()
        assert result.data == {"workerEvents": {"kind": "CREATED", "worker": {"id": n, "status": "AGENDADO"}}}
        # The event's sub-selection was collected through this class's memo, the event's own.
        assert executor._subfields, "graphql-core no longer collects subfields through collect_subfields"
    # graphql-core's per-event executors are copies of the subscription's: a memo shared with
    # them would hold entries for every event here, for as long as the subscription lives.
    assert not subscription._subfields
    assert not subscription._objects
    # graphql-core's own memo (shared by its copies) is never filled.
    assert subscription._relevant_sub_fields == {}


def test_an_object_of_plain_fields_is_read_in_one_loop(sqlite_database_url: str) -> None:
    subscription = PlainFieldsExecutionContext.build(graphql_schema(sqlite_database_url), parse(QUERY))
    assert isinstance(subscription, PlainFieldsExecutionContext)
    executor = subscription.build_per_event_executor(event(7))
    executor.execute_operation()
    assert executor._objects is not None
    plans = {parent.name: plan for (parent, _), (_, plan) in executor._objects.items()}
    # The job has only plain fields selected; the event itself holds an object field.
    assert [name for name, _ in plans["Worker"]] == ["id", "status"]
    assert plans["WorkerEvent"] == ()
