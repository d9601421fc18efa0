"""The shortcut for plain scalar fields gives exactly what graphql-core's own path gives: values,
nulls, enums, custom scalars, resolvers, nested objects, and the errors of bad values."""

from __future__ import annotations

import enum
from typing import Any, NewType

import pytest
import strawberry
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from worker_automation.overrides.plain_fields import PlainFieldsExecutionContext
from worker_automation.schema import BudgetedExecutionContext

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


def _good_items() -> list[Item]:
    return [item for item in _items() if isinstance(item.id, int) and item.must is not None]


class Text(str):
    """A str of its own type: String serializes it as it is, without the shortcut for str."""


@strawberry.type
class Edge:
    """Values at the edges of the built-in scalars' shortcuts (a value a leaf serializes as itself
    needs no call): bools for Int, ints for Boolean and ID, 32-bit bounds, str subclasses, enum
    members and their text."""

    n: int
    flag: bool
    key: strawberry.ID
    text: str
    color: Color


def _edges() -> list[Edge]:
    return [
        Edge(n=True, flag=True, key=7, text=Text("sub"), color=Color.BLUE),  # type: ignore[arg-type]
        Edge(n=2**31 - 1, flag=False, key="k", text="t", color=Color.RED),  # type: ignore[arg-type]
        Edge(n=-(2**31), flag=1, key=strawberry.ID("i"), text="", color="BLUE"),  # type: ignore[arg-type]
    ]


@strawberry.type
class Query:
    @strawberry.field
    def items(self) -> list[Item]:
        return _items()

    @strawberry.field
    def edges(self) -> list[Edge]:
        return _edges()

    @strawberry.field
    def too_large(self) -> list[Edge]:
        return [*_edges(), Edge(n=2**31, flag=True, key=strawberry.ID("x"), text="x", color=Color.RED)]

    @strawberry.field
    def first_edge(self) -> Edge:
        return _edges()[0]

    @strawberry.field
    def good_items(self) -> list[Item]:
        return _good_items()

    @strawberry.field
    def some_items(self) -> list[Item | None]:
        return [None, *_good_items(), None]

    @strawberry.field
    def gap(self) -> list[Item]:
        return [*_good_items(), None]  # type: ignore[list-item]

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
    "{ goodItems { id label color stamp must ratio } }",
    "{ goodItems { id ...F } } fragment F on Item { label color }",
    "{ goodItems { id label child { name } } }",
    "{ someItems { id label } }",
    "{ gap { id } }",
    "{ a: goodItems { id } b: items { label } }",
    "{ edges { n flag key text color } }",
    "{ a: edges { color } b: edges { color n } }",
    "{ tooLarge { n } }",
    "{ tooLarge { text flag } }",
    "{ firstEdge { n flag key text color } }",
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


async def test_a_list_of_plain_objects_is_completed_in_one_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    per_item: list[Any] = []
    original = StrawberryGraphQLCoreExecutionContext.complete_list_item_value

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        per_item.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(StrawberryGraphQLCoreExecutionContext, "complete_list_item_value", counted)
    result = await _schema(PlainFieldsExecutionContext).execute("{ goodItems { id color stamp } }")
    assert result.errors is None
    assert result.data == {"goodItems": [{"id": 1, "color": "RED", "stamp": "<2026-01-01>"}]}
    assert per_item == []
    # A bad value anywhere in the list: graphql-core's path, item by item, reports it.
    result = await _schema(PlainFieldsExecutionContext).execute("{ items { id } }")
    assert [e.path for e in result.errors or []] == [["items", 2, "id"]]
    assert len(per_item) == 3


Doc = NewType("Doc", object)


@strawberry.type
class Carrier:
    id: int
    doc: Doc | None


def _carriers() -> list[Carrier]:
    docs = [Carrier(id=n, doc=Doc({"text": "x" * 80, "n": n})) for n in range(5)]
    return [*docs, Carrier(id=None, doc=None)]  # type: ignore[arg-type]


@strawberry.type
class CarrierQuery:
    @strawberry.field
    def carriers(self) -> list[Carrier]:
        return _carriers()


async def test_a_list_that_falls_back_is_charged_to_the_size_budget_once() -> None:
    """JSON values count against the answer's size budget as they are serialized: a list that
    leaves the one-loop path halfway is not charged twice for the items before."""
    from worker_automation.schema.response_budget import response_budget, spend_json

    def spent_by(context_class: type) -> tuple[int, list[Any]]:
        config = StrawberryConfig(
            scalar_map={Doc: strawberry.scalar(name="Doc", serialize=spend_json, parse_value=lambda v: v)}
        )
        schema = strawberry.Schema(query=CarrierQuery, config=config, execution_context_class=context_class)
        with response_budget(800) as budget:
            result = schema.execute_sync("{ carriers { doc id } }")
        return budget.spent, [e.message for e in result.errors or []]

    # The schema's executor: the shortcut charging the request's budget.
    fast_spent, fast_errors = spent_by(BudgetedExecutionContext)
    plain_spent, plain_errors = spent_by(StrawberryGraphQLCoreExecutionContext)
    assert fast_spent == plain_spent > 0
    assert fast_errors == plain_errors
    assert len(fast_errors) == 1 and "null" in fast_errors[0].lower()
