"""How deep and how costly an operation is, known before it runs.

Depth counts every level, introspection included (``__type { fields { type { ... } } }`` is as
deep as it looks). Cost estimates the work and the size of the answer: each field selected costs
one for every object it is selected on, the fields that hold free JSON (``context``, ``result``,
``metadataJson``: up to ``WA_MAX_CONTEXT_BYTES`` / ``WA_MAX_RESULT_BYTES`` each) cost
:data:`HEAVY_WEIGHT`, and a list multiplies the cost of what is selected inside it by its size:
the page size asked for (a variable counts as the largest page), or :data:`DEFAULT_LIST_SIZE`
for lists without one. Aliases add up like any other selection. Introspection is sized by the
schema, not by the data, and costs nothing beyond its depth.

The numbers (see README, "Limits"): the console's list of 100 jobs with every field, one job with
its context, result and attempts, the dashboard and queue load all cost well under the limit;
thirty aliases of a 100-job page with contexts and results do not.
"""

from __future__ import annotations

from typing import Any, Final

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLField,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationRule,
)
from graphql.type.introspection import SchemaMetaFieldDef, TypeMetaFieldDef, TypeNameMetaFieldDef
from graphql.validation import ValidationContext

# Fields holding free JSON a caller wrote (a job's context, its result, metadata).
HEAVY_FIELDS: Final = frozenset({"context", "result", "metadataJson"})
HEAVY_WEIGHT: Final = 50
# The size assumed for lists without a size argument (registries, machines, a job's attempts and
# the live views' job lists, which hold up to 20 per queue but seldom that many).
DEFAULT_LIST_SIZE: Final = 10
# Arguments that size a list, and the most they can ask for (resolvers cap them the same way).
SIZE_ARGUMENTS: Final = {"perPage": 100, "first": 100, "last": 100, "limit": 500}
_INTROSPECTION: Final = {
    "__schema": SchemaMetaFieldDef,
    "__type": TypeMetaFieldDef,
    "__typename": TypeNameMetaFieldDef,
}


def _unwrap(type_: Any) -> tuple[Any, bool]:
    """The named type under ``type_`` and whether a list wraps it."""
    is_list = False
    while isinstance(type_, GraphQLNonNull | GraphQLList):
        is_list = is_list or isinstance(type_, GraphQLList)
        type_ = type_.of_type
    return type_, is_list


def _asked_size(definition: GraphQLField, node: FieldNode) -> int | None:
    """How many items a field's size argument asks for (None without one): the literal, capped
    like the resolvers cap it, or the most it may be when it comes from a variable."""
    for name, most in SIZE_ARGUMENTS.items():
        if name not in definition.args:
            continue
        given = next((a.value for a in node.arguments or () if a.name.value == name), None)
        if given is None:
            default = definition.args[name].default_value
            return min(default, most) if isinstance(default, int) and default > 0 else most
        if isinstance(given, IntValueNode):
            return max(1, min(int(given.value), most))
        return most  # a variable (or a value the other rules refuse): the largest it can be
    return None


class _Walker:
    """Depth and cost of one operation, fragments expanded (each at most once per path)."""

    def __init__(self, schema: GraphQLSchema, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self.schema = schema
        self.fragments = fragments

    def walk(
        self,
        selection_set: SelectionSetNode,
        parent: GraphQLNamedType | None,
        seen: frozenset[str],
        page: int | None = None,
    ) -> tuple[int, int]:
        """(depth, cost) of ``selection_set`` selected once on ``parent``; ``page`` is the size
        a parent's argument asked for (``workers(perPage: 100) { items }``)."""
        depth, cost = 0, 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                inner_depth, inner_cost = self._field(selection, parent, seen, page)
                depth, cost = max(depth, inner_depth), cost + inner_cost
            elif isinstance(selection, InlineFragmentNode):
                target = parent
                if selection.type_condition is not None:
                    target = self.schema.get_type(selection.type_condition.name.value)
                inner_depth, inner_cost = self.walk(selection.selection_set, target, seen, page)
                depth, cost = max(depth, inner_depth), cost + inner_cost
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in seen:
                    continue  # unknown or cyclic: other rules report it
                target = self.schema.get_type(fragment.type_condition.name.value)
                inner_depth, inner_cost = self.walk(fragment.selection_set, target, seen | {name}, page)
                depth, cost = max(depth, inner_depth), cost + inner_cost
        return depth, cost

    def _field(
        self, node: FieldNode, parent: GraphQLNamedType | None, seen: frozenset[str], page: int | None
    ) -> tuple[int, int]:
        name = node.name.value
        definition: GraphQLField | None = _INTROSPECTION.get(name)
        if definition is None and isinstance(parent, GraphQLObjectType):
            definition = parent.fields.get(name)
        introspection = name.startswith("__") or (parent is not None and parent.name.startswith("__"))
        own = 0 if introspection else (HEAVY_WEIGHT if name in HEAVY_FIELDS else 1)
        if node.selection_set is None:
            return 0, own
        target, is_list = _unwrap(definition.type) if definition is not None else (None, False)
        asked = _asked_size(definition, node) if definition is not None else None
        if introspection:
            depth, _ = self.walk(node.selection_set, target, seen)
            return depth + 1, 0
        if not is_list:
            # A page object: its size argument sizes the list inside it.
            depth, inner = self.walk(node.selection_set, target, seen, asked)
            return depth + 1, own + inner
        size = asked or page or DEFAULT_LIST_SIZE
        depth, inner = self.walk(node.selection_set, target, seen)
        return depth + 1, own + size * inner


def operation_bounds(schema: GraphQLSchema, document: DocumentNode) -> dict[str, tuple[int, int]]:
    """(depth, cost) of each operation of ``document``, by name ("anonymous" when unnamed)."""
    definitions = document.definitions
    fragments = {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}
    walker = _Walker(schema, fragments)
    bounds: dict[str, tuple[int, int]] = {}
    for definition in definitions:
        if isinstance(definition, OperationDefinitionNode):
            root = schema.get_root_type(definition.operation)
            name = definition.name.value if definition.name else "anonymous"
            bounds[name] = walker.walk(definition.selection_set, root, frozenset())
    return bounds


def bounds_rule(max_depth: int, max_cost: int) -> type[ValidationRule]:
    """A validation rule refusing operations deeper than ``max_depth`` or costlier than
    ``max_cost``; every operation of the document is checked, named or not."""

    class OperationBoundsRule(ValidationRule):
        """Reports operations over the depth or the cost limit."""

        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            definitions = context.document.definitions
            fragments = {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}
            walker = _Walker(context.schema, fragments)
            for definition in definitions:
                if not isinstance(definition, OperationDefinitionNode):
                    continue
                root = context.schema.get_root_type(definition.operation)
                depth, cost = walker.walk(definition.selection_set, root, frozenset())
                name = definition.name.value if definition.name else "anonymous"
                if depth > max_depth:
                    context.report_error(
                        GraphQLError(f"'{name}' exceeds maximum operation depth of {max_depth}", [definition])
                    )
                if cost > max_cost:
                    context.report_error(
                        GraphQLError(
                            f"'{name}' custa {cost}, acima do limite de {max_cost} (cada campo conta uma vez "
                            f"por objeto; context, result e metadataJson contam {HEAVY_WEIGHT}; listas "
                            "multiplicam pelo tamanho da pagina). Peca menos itens ou menos campos.",
                            [definition],
                            extensions={"code": "QUERY_TOO_COSTLY", "cost": cost, "maxCost": max_cost},
                        )
                    )

    return OperationBoundsRule
