"""The GraphQL guards cost time linear in the document: fragments costed once however often they
are spread, repeated fields refused by a bounded comparison, the standard introspection query
let through with its own depth bound, no suggestions when introspection is off, and every string
argument bounded like its REST twin."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from graphql import GraphQLError, get_introspection_query
from strawberry.types import ExecutionResult

from tests.unit.graphql_support import Api, code, make_api
from worker_automation.resolvers.services import Services
from worker_automation.schema import WorkerAutomationSchema, build_schema
from worker_automation.schema.cost import INTROSPECTION_DEPTH, document_bounds
from worker_automation.schema.limits import TOO_COMPLEX_MESSAGE
from worker_automation.schema.text_bounds import MAX_TEXT_CHARS, variables_too_long
from worker_automation.settings import Settings

SETTINGS = Settings(database_url="sqlite+aiosqlite:///:memory:")
OPEN = build_schema(SETTINGS)
CLOSED = build_schema(SETTINGS.model_copy(update={"introspection": False}))
STANDARD_INTROSPECTION = get_introspection_query(
    descriptions=True,
    specified_by_url=True,
    directive_is_repeatable=True,
    schema_description=True,
    input_value_deprecation=True,
)


def fan_out(n: int, leaf: str = "__typename", on: str = "Query", root: str = "{ ...F0 }") -> str:
    """``n`` fragments, each spreading the next twice: 2^n leaves from ~40n bytes."""
    chain = " ".join(f"fragment F{i} on {on} {{ ...F{i + 1} ...F{i + 1} }}" for i in range(n))
    return f"{root} {chain} fragment F{n} on {on} {{ {leaf} }}"


async def errors_of(schema: WorkerAutomationSchema, query: str, variables: Any = None) -> list[GraphQLError]:
    """The errors of ``query`` refused before any resolver runs (no context is needed)."""
    result = await schema.execute(query, variable_values=variables)
    return list(result.errors or [])


def cpu_seconds_of(schema: WorkerAutomationSchema, query: str) -> tuple[float, list[GraphQLError]]:
    """The CPU seconds ``query`` costs ``schema``, and its errors. A trivial document runs first,
    untimed: the first execution in a process pays for one-time set-up (0.15 s of it measured),
    which is no part of what a document costs. The time is this thread's: threads another test of
    the process left running (an embedded broker's, a pool's) must not count."""
    import asyncio

    asyncio.run(errors_of(schema, "{ __typename }"))
    started = time.thread_time()
    errors = asyncio.run(errors_of(schema, query))
    return time.thread_time() - started, errors


@pytest.mark.timeout(20)
def test_fragment_fan_out_is_costed_once_per_fragment() -> None:
    # Walking F(i+1) again at every spread would take 2^40 steps: this test would never end.
    elapsed, errors = cpu_seconds_of(OPEN, fan_out(40, leaf="stats { total }"))
    assert elapsed < 1.0, elapsed
    costly = [e for e in errors if code(e) == "QUERY_TOO_COSTLY"]
    # Two fields (stats, total) times 2^40 leaves: the cost is multiplied, not walked.
    assert costly and costly[0].extensions is not None and costly[0].extensions["cost"] == 2 * 2**40
    aliases, alias_errors = cpu_seconds_of(OPEN, fan_out(40, leaf="a: __typename"))
    assert aliases < 1.0 and any(e.message == f"{2**40} aliases found. Allowed: 30" for e in alias_errors)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "query",
    [
        fan_out(40, leaf="name fields { name }", on="__Type", root="{ __schema { types { ...F0 } } }"),
        fan_out(40, leaf="id", on="Worker", root="{ workers { items { ...F0 } } }"),
        "query($a: Int) { ...F0 } "
        + " ".join(f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(40))
        + " fragment F40 on Query { worker(id: $a) { id } }",
    ],
    ids=["introspection", "inside a list", "with a variable"],
)
def test_every_rule_is_linear_in_fragment_fan_out(query: str) -> None:
    elapsed, _errors = cpu_seconds_of(OPEN, query)
    assert elapsed < 1.0, elapsed


@pytest.mark.parametrize(
    "query",
    [
        "{" + "stats{total}" * 170 + "}",
        "{" + "a:stats{total}" * 140 + "}",
        "{" + "dashboard{stats{total}}" * 88 + "}",
        "{" + "...on Query{stats{total}}" * 81 + "}",
    ],
    ids=["repeated field", "repeated alias", "repeated nested field", "repeated inline fragment"],
)
def test_fields_repeated_under_one_object_are_refused_fast(query: str) -> None:
    assert len(query) <= 2048
    elapsed, errors = cpu_seconds_of(OPEN, query)
    assert elapsed < 0.5, elapsed  # a full second and more before the comparison was bounded
    assert any(e.message == TOO_COMPLEX_MESSAGE for e in errors), [e.message for e in errors]


async def test_a_field_selected_twice_still_merges() -> None:
    assert not await errors_of(OPEN, "{ __typename __typename a: __typename a: __typename }")


async def test_the_standard_introspection_query_passes_the_default_limits() -> None:
    result = await OPEN.execute(STANDARD_INTROSPECTION)
    assert result.errors is None, [e.message for e in result.errors or []]
    names = {t["name"] for t in result.data["__schema"]["types"]} if result.data else set()
    assert {"Query", "Worker", "WorkerFilter"} <= names


def test_introspection_depth_has_a_bound_of_its_own() -> None:
    from graphql import build_schema as schema_from_sdl
    from graphql import parse

    graphql_schema = schema_from_sdl(OPEN.as_str())
    standard = document_bounds(graphql_schema, parse(STANDARD_INTROSPECTION))
    (_node, _name, bounds) = standard[0]
    assert bounds.depth <= SETTINGS.max_query_depth < bounds.introspection_depth <= INTROSPECTION_DEPTH


async def test_nested_of_type_past_the_introspection_bound_is_refused() -> None:
    def of_type(levels: int) -> str:
        return (
            '{ __type(name: "Query") { fields { type '
            + "{ ofType " * levels
            + "{ name }"
            + " }" * (levels + 3)
        )

    assert not await errors_of(OPEN, of_type(INTROSPECTION_DEPTH - 3))
    refused = await errors_of(OPEN, of_type(INTROSPECTION_DEPTH))
    assert [e.message for e in refused] == [
        f"'anonymous' exceeds maximum introspection depth of {INTROSPECTION_DEPTH} "
        "(levels below __schema or __type)"
    ]


async def test_depth_still_counts_on_the_data() -> None:
    shallow = build_schema(SETTINGS.model_copy(update={"max_query_depth": 2}))
    refused = await errors_of(shallow, "{ dashboard { queued { items { id } } } }")
    assert [e.message for e in refused] == ["'anonymous' exceeds maximum operation depth of 2"]


MISSPELT = {
    "field": ("{ stat { total } }", None),
    "argument": ("{ workers(perPag: 1) { total } }", None),
    "type": ("query($f: WorkerFiltr) { workers(filter: $f) { total } }", None),
    "enum literal": ("{ workers(filter: {status: AGENDAD}) { total } }", None),
    "input field": ("{ workers(filter: {qq: 1}) { total } }", None),
    "enum variable": (
        "query($f: WorkerFilter) { workers(filter: $f) { total } }",
        {"f": {"status": "AGENDAD"}},
    ),
}


@pytest.mark.parametrize("case", sorted(MISSPELT))
async def test_no_suggestions_when_introspection_is_off(case: str) -> None:
    query, variables = MISSPELT[case]
    suggested = await errors_of(OPEN, query, variables)
    assert any("Did you mean" in e.message for e in suggested), [e.message for e in suggested]
    hidden = await errors_of(CLOSED, query, variables)
    assert hidden and not any("Did you mean" in e.message for e in hidden), [e.message for e in hidden]


async def test_no_suggestions_in_a_subscription_either() -> None:
    query = "subscription($f: WorkerEventFilter) { workerEvents(filter: $f) { kind } }"
    for schema, suggests in ((OPEN, True), (CLOSED, False)):
        stream = await schema.subscribe(query, variable_values={"f": {"status": "AGENDAD"}})
        assert not isinstance(stream, ExecutionResult)
        refused = await anext(stream)
        await stream.aclose()
        assert refused.errors, refused
        assert ("Did you mean" in refused.errors[0].message) is suggests, refused.errors[0].message


def test_variables_that_are_not_an_object_are_left_to_graphql_core() -> None:
    from graphql import GraphQLString

    types: dict[str, Any] = {"q": [GraphQLString]}
    assert variables_too_long(["not", "an", "object"], types) is None
    assert variables_too_long("x" * 1000, types) is None
    too_long = variables_too_long({"q": "x" * (MAX_TEXT_CHARS + 1)}, types)
    assert too_long is not None and (too_long.extensions or {}).get("field") == "q"


@pytest.fixture
async def api(sqlite_services: Services) -> Api:
    return await make_api(sqlite_services)


async def test_string_arguments_are_bounded_like_rest(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR)
    long = "x" * 50_001
    # (A literal of 50,000 characters is refused for the document's size already.)
    literal = await api.fails(f'{{ workers(filter: {{q: "{"x" * 1000}"}}) {{ total }} }}')
    assert (code(literal), (literal.extensions or {}).get("field")) == ("BAD_USER_INPUT", "filter.q")
    query = (
        "query($f: WorkerFilter, $q: String) "
        "{ a: workers(filter: $f) { total } b: searchAutomations(q: $q) { count } }"
    )
    for attempt in range(2):
        if attempt:  # now the documents' validation is reused: the variables are checked all the same
            await api.ok(query, {"f": {"q": "y"}, "q": "y"})
            missing = await api.fails("query($t: String!) { taskStatus(taskId: $t) { state } }", {"t": "y"})
            assert code(missing) == "NOT_FOUND"
        by_filter = await api.fails(query, {"f": {"q": long}})
        assert (code(by_filter), (by_filter.extensions or {}).get("field")) == ("BAD_USER_INPUT", "f.q")
        by_task = await api.fails(
            "query($t: String!) { taskStatus(taskId: $t) { state } }", {"t": "t" * (MAX_TEXT_CHARS + 1)}
        )
        assert (by_task.extensions or {}).get("field") == "t"
        by_q = await api.fails(query, {"q": long})
        assert (by_q.extensions or {}).get("field") == "q"
    # At the bound: answered; JSON inside a context is not a string argument.
    assert (await api.ok(query, {"f": {"q": "y" * MAX_TEXT_CHARS}}))["a"]["total"] == 0
    with_variables = await api.fails(query, {"f": {"q": "y" * (MAX_TEXT_CHARS + 1)}})
    assert (with_variables.extensions or {}).get("field") == "f.q"
    job = await api.dispatch(context={"note": "z" * 2_000})
    assert job["id"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
