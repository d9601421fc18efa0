"""Strawberry's public behaviour the schema builds on instead of its private attributes: the
caller's operationName before parsing (``schema.limits``), a subscription's selection run once on
a given root (``schema.live_views``) and fragments inside ``selected_fields`` (``schema.context``).
A release that changes any of them fails here first."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator

import strawberry
from strawberry.extensions import SchemaExtension
from strawberry.types import Info
from strawberry.types.graphql import OperationType
from strawberry.types.nodes import FragmentSpread, SelectedField

from worker_automation.schema.context import selects

SEEN: dict[str, object] = {}


@strawberry.type
class Item:
    id: int
    name: str


@strawberry.type
class Query:
    @strawberry.field
    def item(self, info: Info) -> Item:
        SEEN["selected"] = info.selected_fields
        SEEN["selects_name"] = selects(info, "name")
        return Item(id=1, name="one")


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def items(self) -> AsyncGenerator[Item, None]:
        yield Item(id=0, name="never run here")


class Recording(SchemaExtension):
    def on_operation(self) -> Iterator[None]:
        SEEN["document_at_start"] = self.execution_context.graphql_document
        SEEN["name_at_start"] = self.execution_context.operation_name
        yield
        SEEN["name_at_end"] = self.execution_context.operation_name


SCHEMA = strawberry.Schema(query=Query, subscription=Subscription, extensions=[Recording])


def test_operation_name_is_the_callers_until_the_document_is_parsed() -> None:
    SCHEMA.execute_sync("query First { item { id } } query Second { item { id } }", operation_name="Second")
    assert SEEN["document_at_start"] is None
    assert SEEN["name_at_start"] == "Second"
    SCHEMA.execute_sync("query First { item { id } }")
    assert SEEN["name_at_start"] is None  # nothing sent, nothing parsed yet
    assert SEEN["name_at_end"] == "First"  # Strawberry's fallback, once parsed


def test_a_subscription_selection_runs_once_on_a_given_root() -> None:
    result = SCHEMA.execute_sync(
        "subscription { items { id name } }",
        root_value=None,
        allowed_operation_types=(OperationType.SUBSCRIPTION,),
    )
    # The subscription's field resolves to its root value: none here, so the null is reported.
    assert result.errors, "a subscription no longer runs through execute_sync"
    with_root = SCHEMA.execute_sync(
        "subscription { items { id name } }",
        root_value=Item(id=7, name="seven"),
        allowed_operation_types=(OperationType.SUBSCRIPTION,),
    )
    assert with_root.errors is None
    assert with_root.data == {"items": {"id": 7, "name": "seven"}}


def test_selected_fields_carry_the_fragments_selections() -> None:
    result = SCHEMA.execute_sync("{ item { id ...Named } } fragment Named on Item { name }")
    assert result.errors is None
    selected = SEEN["selected"]
    assert isinstance(selected, list) and len(selected) == 1
    field = selected[0]
    assert isinstance(field, SelectedField) and field.name == "item"
    spread = field.selections[1]
    assert isinstance(spread, FragmentSpread)
    assert [s.name for s in spread.selections if isinstance(s, SelectedField)] == ["name"]
    assert SEEN["selects_name"] is True
