"""The shortcut for plain scalar fields gives exactly what graphql-core's own path gives: values,
nulls, enums, custom scalars, resolvers, nested objects, and the errors of bad values."""

from __future__ import annotations

import enum
from typing import Any, NewType

import pytest
import strawberry
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from worker_automation.schema.plain_fields import PlainFieldsExecutionContext

Stamp = NewType("Stamp", str)


@strawberry.enum
class Color(enum.Enum):
    RED = "RED"
    BLUE = "BLUE"


@strawberry.type
class Child:
    name: str


@strawberry.type
class Item:
    id: int
    label: str | None
    color: Color
    stamp: Stamp
    must: str
    ratio: float
    child: Child | None

    @strawberry.field
    def doubled(self, by: int = 2) -> int:
        return self.id * by


def _items() -> list[Item]:
    return [
        Item(
            id=1,
            label="a",
            color=Color.RED,
            stamp=Stamp("2026-01-01"),
            must="x",
            ratio=0.5,
            child=Child(name="c"),
        ),
        Item(id=2, label=None, color=Color.BLUE, stamp=Stamp("t"), must=None, ratio=1, child=None),  # type: ignore[arg-type]
        Item(id="bad", label="c", color="GREEN", stamp=Stamp("s"), must="y", ratio="no", child=None),  # type: ignore[arg-type]
    ]


@strawberry.type
class Query:
    @strawberry.field
    def items(self) -> list[Item]:
        return _items()

    @strawberry.field
    async def later(self) -> list[Item]:
        return _items()


def _schema(context_class: type) -> strawberry.Schema:
    config = StrawberryConfig(
        scalar_map={Stamp: strawberry.scalar(name="Stamp", serialize=lambda v: f"<{v}>", parse_value=str)}
    )
    return strawberry.Schema(query=Query, config=config, execution_context_class=context_class)


QUERIES = [
    "{ items { id label color stamp ratio } }",
    "{ items { id must } }",
    "{ items { alias: label doubled d3: doubled(by: 3) child { name } } }",
    "{ later { id color label child { name } } }",
    "{ items { id @include(if: false) label @skip(if: false) __typename } }",
]


@pytest.mark.parametrize("query", QUERIES)
async def test_same_result_as_graphql_core(query: str) -> None:
    fast = await _schema(PlainFieldsExecutionContext).execute(query)
    plain = await _schema(StrawberryGraphQLCoreExecutionContext).execute(query)

    def errors(result: Any) -> list[Any]:
        return sorted((e.message, e.path) for e in result.errors or [])

    assert fast.data == plain.data
    assert errors(fast) == errors(plain)


@pytest.mark.parametrize(
    ("query", "path"),
    [("{ items { must } }", ["items", 1, "must"]), ("{ items { id } }", ["items", 2, "id"])],
)
async def test_bad_values_still_report_errors(query: str, path: list[Any]) -> None:
    result = await _schema(PlainFieldsExecutionContext).execute(query)
    assert result.data is None
    assert [e.path for e in result.errors or []] == [path]
