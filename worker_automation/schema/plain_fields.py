"""Plain scalar fields of listed objects resolved without graphql-core's per-field machinery.

A page of 20 jobs with ten fields each is 200 field executions, and graphql-core builds a resolve
info, looks for arguments and dispatches the completion for every one of them, although a field
with no resolver of its own (Strawberry's "basic" field) only reads an attribute and serializes
it. That per-field work was most of the CPU of a GraphQL list page. Here such a field, when it
returns a scalar or an enum, is read and serialized directly; anything else (resolvers, objects,
lists, arguments, middleware, a null where none is allowed, a value its type refuses) takes
graphql-core's path unchanged, errors included.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphql import (
    GraphQLField,
    GraphQLLeafType,
    GraphQLObjectType,
    Undefined,
    get_nullable_type,
    is_leaf_type,
    is_non_null_type,
)
from graphql.pyutils import Path
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.types.field import StrawberryField


@dataclass(frozen=True)
class _Plain:
    """How to read and serialize one plain scalar field."""

    read: Callable[[Any, str], object]  # Strawberry's default resolver (getattr unless configured)
    attribute: str
    leaf: GraphQLLeafType
    non_null: bool


# Per GraphQL field (kept alive here, so an id is never reused): how to read it, or None when it
# is not a plain scalar field.
_PLANS: dict[int, tuple[GraphQLField, _Plain | None]] = {}


def _plan(field: GraphQLField) -> _Plain | None:
    known = _PLANS.get(id(field))
    if known is not None and known[0] is field:
        return known[1]
    definition = field.extensions.get("strawberry-definition") if field.extensions else None
    plan: _Plain | None = None
    if (
        isinstance(definition, StrawberryField)
        and definition.is_basic_field
        and not field.args
        # Strawberry's resolver for such a field reads the attribute without the info object.
        and getattr(field.resolve, "_is_default", False)
    ):
        inner = get_nullable_type(field.type)
        if is_leaf_type(inner):
            plan = _Plain(
                definition.default_resolver, definition.python_name, inner, is_non_null_type(field.type)
            )
    _PLANS[id(field)] = (field, plan)
    return plan


class PlainFieldsExecutionContext(StrawberryGraphQLCoreExecutionContext):
    """Strawberry's execution context with the shortcut for plain scalar fields."""

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
                    elif not isinstance(value, Exception) and not self.is_awaitable(value):
                        serialized = plan.leaf.serialize(value)
                        if serialized is not None and serialized is not Undefined:
                            return serialized
                except Exception:  # graphql-core's path below reports it properly
                    pass
        return super().execute_field(parent_type, source, field_details_list, path, position_context)
