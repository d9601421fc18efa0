"""What ``overrides.plain_fields`` and ``overrides.acyclic_executor`` rely on in graphql-core's
executor and Strawberry's execution context: a release that renames a hook, changes its
parameters, stops calling it, or frees its helpers' cycle on its own fails here first."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import strawberry
from graphql import GraphQLField, GraphQLObjectType, GraphQLResolveInfoHelpers
from graphql.execution import Executor, collect_fields
from graphql.execution.collect_fields import CollectedFields
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types.field import StrawberryField

from worker_automation.overrides.acyclic_executor import AcyclicExecutionContext
from worker_automation.overrides.plain_fields import PlainFieldsExecutionContext


def parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_overridden_hooks_keep_their_parameters() -> None:
    executor = StrawberryGraphQLCoreExecutionContext
    assert issubclass(executor, Executor)
    expected = {
        "execute_fields": [
            "self", "parent_type", "source_value", "path", "grouped_field_set", "position_context",
        ],
        "execute_field": ["self", "parent_type", "source", "field_details_list", "path", "position_context"],
        "complete_iterable_value": [
            "self", "item_type", "field_details_list", "info", "path", "items", "position_context",
        ],
        "collect_subfields": ["self", "return_type", "field_details_list"],
        "get_stream_usage": ["self", "field_details_list", "path"],
        "build_per_event_executor": ["self", "payload"],
    }  # fmt: skip
    for name, names in expected.items():
        assert parameters(getattr(executor, name)) == names, name
    # The memo is rebuilt with graphql-core's own function and the executor's attributes.
    assert parameters(collect_fields.collect_subfields) == [
        "schema", "fragments", "variable_values", "operation", "return_type", "field_details_list",
        "hide_suggestions",
    ]  # fmt: skip
    assert list(CollectedFields._fields) == [
        "grouped_field_set", "new_defer_usages", "forbidden_directive_instances",
    ]  # fmt: skip
    assert parameters(GraphQLResolveInfoHelpers) == ["gather", "track"]


@strawberry.type
class Item:
    id: int
    name: str


@strawberry.type
class Query:
    @strawberry.field
    def items(self) -> list[Item]:
        return [Item(id=n, name=f"item {n}") for n in range(3)]


def test_an_execution_goes_through_the_hooks_and_keeps_the_attributes_read() -> None:
    called: list[str] = []
    seen: dict[str, Any] = {}

    class Watching(StrawberryGraphQLCoreExecutionContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # Read by the overrides: the executor's own attributes, set by its constructor.
            for name in ("schema", "fragments", "variable_values", "operation", "hide_suggestions"):
                seen[name] = getattr(self, name)
            seen["is_awaitable"] = self.is_awaitable
            seen["middleware_manager"] = self.middleware_manager
            seen["async_helpers"] = self.async_helpers

        def execute_fields(self, *args: Any) -> Any:
            called.append("execute_fields")
            return super().execute_fields(*args)

        def execute_field(self, *args: Any) -> Any:
            called.append("execute_field")
            return super().execute_field(*args)

        def complete_iterable_value(self, *args: Any) -> Any:
            called.append("complete_iterable_value")
            return super().complete_iterable_value(*args)

        def collect_subfields(self, *args: Any) -> Any:
            called.append("collect_subfields")
            return super().collect_subfields(*args)

    schema = strawberry.Schema(query=Query, execution_context_class=Watching)
    result = schema.execute_sync("{ items { id name } }")
    assert result.errors is None
    assert result.data == {"items": [{"id": n, "name": f"item {n}"} for n in range(3)]}
    assert {"execute_fields", "execute_field", "complete_iterable_value", "collect_subfields"} <= set(called)
    assert callable(seen["is_awaitable"])
    # Strawberry always passes a middleware manager, with its middlewares (none here).
    assert len(seen["middleware_manager"].middlewares) == 0
    assert isinstance(seen["async_helpers"], GraphQLResolveInfoHelpers)


def test_a_plain_field_is_a_basic_strawberry_field_read_by_its_default_resolver() -> None:
    schema = strawberry.Schema(query=Query)
    graphql_schema = schema._schema  # the graphql-core schema Strawberry builds
    item = graphql_schema.type_map["Item"]
    assert isinstance(item, GraphQLObjectType)
    field = item.fields["name"]
    assert isinstance(field, GraphQLField)
    definition = field.extensions["strawberry-definition"]
    assert isinstance(definition, StrawberryField)
    assert definition.is_basic_field
    assert definition.python_name == "name"
    assert definition.default_resolver(Item(id=1, name="x"), "name") == "x"
    assert field.resolve is not None


def test_graphql_cores_helpers_still_hold_their_executor_in_a_cycle() -> None:
    """The reason for the acyclic executor: when graphql-core's own helpers stop being bound
    methods of the executor, the override is no longer needed."""
    holder: dict[str, Executor[Any]] = {}

    class Keeping(StrawberryGraphQLCoreExecutionContext):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            holder["executor"] = self

    strawberry.Schema(query=Query, execution_context_class=Keeping).execute_sync("{ items { id } }")
    executor = holder["executor"]
    gather: Any = executor.async_helpers.gather
    assert gather.__self__ is executor


def test_the_overrides_build_on_strawberrys_execution_context() -> None:
    assert issubclass(AcyclicExecutionContext, StrawberryGraphQLCoreExecutionContext)
    assert issubclass(PlainFieldsExecutionContext, AcyclicExecutionContext)
    schema = strawberry.Schema(query=Query, execution_context_class=PlainFieldsExecutionContext)
    result = schema.execute_sync("{ items { id name } }")
    assert result.errors is None
    assert result.data == {"items": [{"id": n, "name": f"item {n}"} for n in range(3)]}
