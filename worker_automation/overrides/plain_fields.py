"""Plain scalar fields of listed objects resolved without graphql-core's per-field machinery.

A page of 20 jobs with ten fields each is 200 field executions, and graphql-core builds a resolve
info, looks for arguments and dispatches the completion for every one of them, although a field
with no resolver of its own (Strawberry's "basic" field) only reads an attribute and serializes
it. That per-field work was most of the CPU of a GraphQL list page. Here such a field, when it
returns a scalar or an enum, is read and serialized directly; anything else (resolvers, objects,
lists, arguments, middleware, a null where none is allowed, a value its type refuses) takes
graphql-core's path unchanged, errors included.

An object whose selected fields are all plain (a job of a list page) goes further: its fields are
read in one loop, without a path or a call per field. The first value that does not fit (a null
where none is allowed, a value its type refuses) sends the whole object down the per-field path,
which reports it as graphql-core would. A list of such objects (the page itself) is completed in
one loop as well, without graphql-core's calls per item; one item that does not fit sends the
whole list down graphql-core's path. Either way, JSON values already charged to the answer's size
budget (see ``response_budget``) are given back before the fallback charges them again.

The sub-selections collected for a list are memoized per execution, as graphql-core does; the memo
is this class's own, so the executor copied for each subscription event starts with an empty one
(graphql-core's copy shares its memo, which then grew on every event for the life of the
subscription).

What it buys, side by side in one run (``bench.scale``, 32 clients each on a GraphQL list page of
its own, 5 runs): 1.02 ms of API CPU per page instead of 1.52 ms with graphql-core's per-field
path, p99 47 ms instead of 77 ms, 889 pages/s instead of 627; the target is a page in at most
1.0 ms of API CPU with p99 < 50 ms. What it relies on (graphql-core's executor methods
``execute_fields``, ``execute_field``, ``complete_iterable_value``, ``collect_subfields``,
``get_stream_usage`` and ``build_per_event_executor`` with their current signatures, and
Strawberry's field definition in ``GraphQLField.extensions``) is checked by
``tests/contract/test_graphql_core_executor.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from types import CoroutineType, GeneratorType
from typing import Any, Final, Protocol, TypeVar

from graphql import (
    GRAPHQL_MAX_INT,
    GRAPHQL_MIN_INT,
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLField,
    GraphQLID,
    GraphQLInt,
    GraphQLLeafType,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLString,
    Undefined,
    get_nullable_type,
    is_leaf_type,
    is_non_null_type,
)
from graphql.execution.collect_fields import (
    CollectedFields,
    FieldDetailsList,
    GroupedFieldSet,
    collect_subfields,
)
from graphql.pyutils import Path
from strawberry.types.field import StrawberryField

from worker_automation.overrides.acyclic_executor import AcyclicExecutionContext


@dataclass(frozen=True)
class _Plain:
    """How to read and serialize one plain scalar field."""

    read: Callable[[Any, str], object]  # Strawberry's default resolver (getattr unless configured)
    attribute: str
    leaf: GraphQLLeafType
    non_null: bool
    # The Python type whose values the leaf serializes as themselves (str for String and ID,
    # bool for Boolean, int within 32 bits for Int), or None: such a value needs no call at all.
    same: type | None = None
    # For an enum, its members' serializations as they were first made (an enum's serialization
    # of a member never changes); None for other leaves.
    names: dict[Any, Any] | None = None


# graphql-core's built-in scalars and the values each serializes unchanged (see its
# ``serialize_string``, ``serialize_id``, ``serialize_boolean`` and ``serialize_int``).
_UNCHANGED: Final[dict[int, type]] = {
    id(GraphQLString): str,
    id(GraphQLID): str,
    id(GraphQLBoolean): bool,
    id(GraphQLInt): int,
}


def _unchanged(plan: _Plain, value: Any) -> bool:
    """Whether ``value`` is its own serialization for ``plan``'s leaf (a str for a String, say)."""
    kind = type(value)
    return kind is plan.same and (kind is not int or GRAPHQL_MIN_INT <= value <= GRAPHQL_MAX_INT)


# Types whose instances are never awaitable (no ``__await__``, neither coroutine nor generator):
# the check graphql-core makes on every value (Strawberry's, an ABC's instance check among them)
# is made once per type instead. Bounded: classes made at run time do not grow it for ever.
_SETTLED_TYPES: dict[type, bool] = {}
_SETTLED_TYPES_MAX: Final = 512


def _never_awaitable(kind: type) -> bool:
    known = _SETTLED_TYPES.get(kind)
    if known is None:
        known = not hasattr(kind, "__await__") and not issubclass(kind, CoroutineType | GeneratorType)
        if len(_SETTLED_TYPES) < _SETTLED_TYPES_MAX:
            _SETTLED_TYPES[kind] = known
    return known


# Per GraphQL field (kept alive here, so an id is never reused): how to read it, or None when it
# is not a plain scalar field.
_PLANS: dict[int, tuple[GraphQLField, _Plain | None]] = {}


def _plan(field: GraphQLField) -> _Plain | None:
    known = _PLANS.get(id(field))
    if known is not None and known[0] is field:
        return known[1]
    definition = field.extensions.get("strawberry-definition") if field.extensions else None
    plan: _Plain | None = None
    # Strawberry's public word for a field it resolves by reading the attribute alone (no resolver,
    # no extension, no permission); of a leaf type, no error handler of Strawberry's can apply.
    if isinstance(definition, StrawberryField) and definition.is_basic_field and not field.args:
        inner = get_nullable_type(field.type)
        if is_leaf_type(inner):
            plan = _Plain(
                definition.default_resolver,
                definition.python_name,
                inner,
                is_non_null_type(field.type),
                _UNCHANGED.get(id(inner)),
                {} if isinstance(inner, GraphQLEnumType) else None,
            )
    _PLANS[id(field)] = (field, plan)
    return plan


Built = TypeVar("Built")


class Budget(Protocol):
    """An answer's size budget, as far as the shortcut needs it: what was spent, and whether the
    limit was passed (the schema's JSON scalar charges it as it serializes)."""

    spent: int
    exceeded: bool


def _given_back_on_fallback(budget: Budget | None, build: Callable[[], Built | None]) -> Built | None:
    """``build()``; when it gives up (None), what it charged to the answer's size ``budget`` (JSON
    values) is given back, since graphql-core's path then serializes and charges them again."""
    if budget is None:
        return build()
    spent, exceeded = budget.spent, budget.exceeded
    built = build()
    if built is None:
        budget.spent, budget.exceeded = spent, exceeded
    return built


# A selection whose fields are not all plain: executed field by field.
_MIXED: Final = ()
Keyed = TypeVar("Keyed")
Value = TypeVar("Value")


def _remembered(
    memo: dict[tuple[GraphQLObjectType, int], tuple[Keyed, Value]],
    parent_type: GraphQLObjectType,
    keyed: Keyed,
    build: Callable[[], Value],
) -> Value:
    """``build()`` once per type and object of one execution. By identity, as graphql-core does:
    the object is kept with its entry, so its id cannot be reused while the memo lives."""
    key = (parent_type, id(keyed))
    found = memo.get(key)
    if found is not None and found[0] is keyed:
        return found[1]
    value = build()
    memo[key] = (keyed, value)
    return value


class PlainFieldsExecutionContext(AcyclicExecutionContext):
    """Strawberry's execution context with the shortcut for plain scalar fields."""

    # This execution's memos (see the module doc); None until first used, and again in the
    # executor of each subscription event.
    _subfields: dict[tuple[GraphQLObjectType, int], tuple[FieldDetailsList, CollectedFields]] | None = None
    _objects: dict[tuple[GraphQLObjectType, int], tuple[GroupedFieldSet, tuple[Any, ...]]] | None = None

    @staticmethod
    def current_budget() -> Budget | None:
        """The size budget of the answer being built, if any (none here; the schema's subclass
        names its own)."""
        return None

    def build_per_event_executor(self, payload: Any) -> Any:
        executor = super().build_per_event_executor(payload)
        assert isinstance(executor, PlainFieldsExecutionContext)  # a copy of this one
        executor._subfields = None
        executor._objects = None
        return executor

    def collect_subfields(
        self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> CollectedFields:
        if self._subfields is None:
            self._subfields = {}
        return _remembered(
            self._subfields,
            return_type,
            field_details_list,
            lambda: collect_subfields(
                self.schema,
                self.fragments,
                self.variable_values,
                self.operation,
                return_type,
                field_details_list,
                self.hide_suggestions,
            ),
        )

    def execute_fields(
        self,
        parent_type: GraphQLObjectType,
        source_value: Any,
        path: Path | None,
        grouped_field_set: GroupedFieldSet,
        position_context: Any,
    ) -> Any:
        plans = self._object_plans(parent_type, grouped_field_set) if position_context is None else _MIXED
        if plans:
            results = _given_back_on_fallback(
                self.current_budget(), lambda: self._plain_object(source_value, plans)
            )
            if results is not None:
                return results
        return super().execute_fields(parent_type, source_value, path, grouped_field_set, position_context)

    def _plain_object(self, source_value: Any, plans: tuple[Any, ...]) -> dict[str, Any] | None:
        """The object's fields read by ``plans``; None at the first value that does not fit (the
        per-field path reports it properly)."""
        results: dict[str, Any] = {}
        try:
            for response_name, plan in plans:
                value = plan.read(source_value, plan.attribute)
                if value is None:
                    if plan.non_null:
                        return None
                    results[response_name] = None
                    continue
                kind = type(value)
                if kind is plan.same and (kind is not int or GRAPHQL_MIN_INT <= value <= GRAPHQL_MAX_INT):
                    results[response_name] = value  # (``_unchanged``, inline: this loop is the page)
                    continue
                names = plan.names
                if names is not None and isinstance(value, Enum):
                    serialized = names.get(value)
                    if serialized is None:
                        serialized = names[value] = plan.leaf.serialize(value)
                elif isinstance(value, Exception) or not self._settled(value):
                    return None
                else:
                    serialized = plan.leaf.serialize(value)
                if serialized is None or serialized is Undefined:
                    return None
                results[response_name] = serialized
        except Exception:
            return None
        return results

    def complete_iterable_value(
        self,
        item_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        info: Any,
        path: Path,
        items: Iterable[Any],
        position_context: Any,
    ) -> Any:
        """A list of objects whose selected fields are all plain (a page of jobs) is completed in
        one loop, without graphql-core's calls per item; any item that does not fit sends the
        whole list down graphql-core's path, which reports it."""
        inner = get_nullable_type(item_type)
        if (
            position_context is None
            and isinstance(items, list)
            and isinstance(inner, GraphQLObjectType)
            and inner.is_type_of is None
            and self.get_stream_usage(field_details_list, path) is None
        ):
            grouped, defer_usages, forbidden = self.collect_subfields(inner, field_details_list)
            plans = _MIXED if defer_usages or forbidden else self._object_plans(inner, grouped)
            if plans:
                non_null = is_non_null_type(item_type)
                completed = _given_back_on_fallback(
                    self.current_budget(), lambda: self._plain_list(items, plans, non_null=non_null)
                )
                if completed is not None:
                    return completed
        return super().complete_iterable_value(
            item_type, field_details_list, info, path, items, position_context
        )

    def _plain_list(self, items: list[Any], plans: tuple[Any, ...], *, non_null: bool) -> list[Any] | None:
        completed: list[Any] = []
        for item in items:
            if item is None:
                if non_null:
                    return None
                completed.append(None)
                continue
            if isinstance(item, Exception) or not self._settled(item):
                return None
            results = self._plain_object(item, plans)
            if results is None:
                return None
            completed.append(results)
        return completed

    def _settled(self, value: Any) -> bool:
        """Whether ``value`` is no awaitable: by its type when that says so, else as graphql-core
        asks (the schema's ``is_awaitable``)."""
        return _never_awaitable(type(value)) or not self.is_awaitable(value)

    def _object_plans(
        self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet
    ) -> tuple[Any, ...]:
        """How to read each field of ``grouped_field_set`` when every one is plain, else ``_MIXED``."""
        if self._objects is None:
            self._objects = {}
        return _remembered(
            self._objects,
            parent_type,
            grouped_field_set,
            lambda: self._plan_object(parent_type, grouped_field_set),
        )

    def _plan_object(
        self, parent_type: GraphQLObjectType, grouped_field_set: GroupedFieldSet
    ) -> tuple[Any, ...]:
        manager = self.middleware_manager
        if manager is not None and manager.middlewares:
            return _MIXED
        chosen: list[tuple[str, _Plain]] = []
        for response_name, field_details_list in grouped_field_set.items():
            node = field_details_list[0].node
            field = self.schema.get_field(parent_type, node.name.value)
            plan = _plan(field) if field is not None and field.resolve is not None else None
            if plan is None or any(details.node.arguments for details in field_details_list):
                return _MIXED
            chosen.append((response_name, plan))
        return tuple(chosen)

    def execute_field(
        self,
        parent_type: GraphQLObjectType,
        source: Any,
        field_details_list: Any,
        path: Path,
        position_context: Any,
    ) -> Any:
        node = field_details_list[0].node
        field = self.schema.get_field(parent_type, node.name.value)
        # Strawberry always passes a middleware manager; only one without middlewares is skipped.
        manager = self.middleware_manager
        plain = field is not None and field.resolve is not None and not node.arguments
        if plain and (manager is None or not manager.middlewares):
            assert field is not None and field.resolve is not None
            plan = _plan(field)
            if plan is not None:
                try:
                    # What Strawberry's resolver of a basic field returns, without the calls around it.
                    value = plan.read(source, plan.attribute)
                    if value is None:
                        if not plan.non_null:
                            return None
                    elif _unchanged(plan, value):
                        return value
                    elif not isinstance(value, Exception) and self._settled(value):
                        serialized = plan.leaf.serialize(value)
                        if serialized is not None and serialized is not Undefined:
                            return serialized
                except Exception:  # graphql-core's path below reports it properly
                    pass
        return super().execute_field(parent_type, source, field_details_list, path, position_context)
