"""How deep and how costly an operation is, and how many aliases it has, known before it runs,
in time linear in the document.

Depth counts every level of the operation; a ``__schema`` or ``__type`` field counts as one, and
the levels below it have a fixed bound of their own (:data:`INTROSPECTION_DEPTH`): introspection
is sized by the schema, and the standard introspection query that GraphiQL and code generators
send is deeper than any operation on the data needs to be.

Cost estimates the work and the size of the answer: each field selected costs one for every
object it is selected on, the fields that hold free JSON (``context``, ``result``,
``metadataJson``: up to ``WA_MAX_CONTEXT_BYTES`` / ``WA_MAX_RESULT_BYTES`` each) cost
:data:`HEAVY_WEIGHT`, and a list multiplies the cost of what is selected inside it by its size:
the page size asked for (a variable counts as the largest page), or :data:`DEFAULT_LIST_SIZE`
for lists without one. Aliases add up like any other selection; introspection costs nothing.
Each fragment is costed once and its bounds added at every spread.

The numbers (see README, "Limits"): the console's list of 100 jobs with every field, one job with
its context, result and attempts, the dashboard and queue load all cost well under the limit;
thirty aliases of a 100-job page with contexts and results do not.
"""

from __future__ import annotations

from dataclasses import dataclass
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
# Levels allowed below ``__schema`` or ``__type``: the standard introspection query of graphql-js
# (what GraphiQL and the code generators send) goes 13 deep, its ``ofType`` chain included.
INTROSPECTION_DEPTH: Final = 20
_INTROSPECTION_ROOTS: Final = frozenset({"__schema", "__type"})
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


@dataclass(frozen=True)
class Bounds:
    """What one selection (an operation, a fragment) asks for, fragments expanded.

    ``depth``: levels of the selection outside introspection (``__schema``/``__type`` count one);
    ``cost``: see the module doc; ``aliases``: aliased fields, each spread of a fragment counting
    its aliases again; ``introspection_depth``: the deepest level below a ``__schema`` or
    ``__type`` field.
    """

    depth: int = 0
    cost: int = 0
    aliases: int = 0
    introspection_depth: int = 0

    def beside(self, other: Bounds) -> Bounds:
        """Two selections side by side: the deeper depth, the sum of costs and aliases."""
        return Bounds(
            max(self.depth, other.depth),
            self.cost + other.cost,
            self.aliases + other.aliases,
            max(self.introspection_depth, other.introspection_depth),
        )


NOTHING: Final = Bounds()


class _Walker:
    """Bounds of the operations of one document.

    Each fragment is walked once for each page size it is selected under (see ``walk``), however
    often it is spread: its bounds are kept and added at every spread, so the work is linear in
    the document (walking the fragment again at every spread would be exponential in the number
    of fragments that spread the next one twice). A fragment spread inside itself counts nothing
    (graphql-core's ``NoFragmentCyclesRule`` refuses the document anyway).
    """

    def __init__(self, schema: GraphQLSchema, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self.schema = schema
        self.fragments = fragments
        self._known: dict[tuple[str, int | None], Bounds] = {}
        self._open: set[str] = set()

    def walk(
        self, selection_set: SelectionSetNode, parent: GraphQLNamedType | None, page: int | None = None
    ) -> Bounds:
        """Bounds of ``selection_set`` selected once on ``parent``; ``page`` is the size a
        parent's argument asked for (``workers(perPage: 100) { items }``)."""
        total = NOTHING
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                total = total.beside(self._field(selection, parent, page))
            elif isinstance(selection, InlineFragmentNode):
                target = parent
                if selection.type_condition is not None:
                    target = self.schema.get_type(selection.type_condition.name.value)
                total = total.beside(self.walk(selection.selection_set, target, page))
            elif isinstance(selection, FragmentSpreadNode):
                total = total.beside(self._fragment(selection.name.value, page))
        return total

    def _fragment(self, name: str, page: int | None) -> Bounds:
        known = self._known.get((name, page))
        if known is not None:
            return known
        fragment = self.fragments.get(name)
        if fragment is None or name in self._open:
            return NOTHING  # unknown or cyclic: other rules report it
        self._open.add(name)
        try:
            target = self.schema.get_type(fragment.type_condition.name.value)
            found = self._known[(name, page)] = self.walk(fragment.selection_set, target, page)
        finally:
            self._open.discard(name)
        return found

    def _field(self, node: FieldNode, parent: GraphQLNamedType | None, page: int | None) -> Bounds:
        name = node.name.value
        aliases = 1 if node.alias is not None else 0
        definition: GraphQLField | None = _INTROSPECTION.get(name)
        if definition is None and isinstance(parent, GraphQLObjectType):
            definition = parent.fields.get(name)
        introspection = name.startswith("__") or (parent is not None and parent.name.startswith("__"))
        own = 0 if introspection else (HEAVY_WEIGHT if name in HEAVY_FIELDS else 1)
        if node.selection_set is None:
            return Bounds(0, own, aliases, 0)
        target, is_list = _unwrap(definition.type) if definition is not None else (None, False)
        asked = _asked_size(definition, node) if definition is not None else None
        if introspection:
            inner = self.walk(node.selection_set, target)
            below = inner.introspection_depth
            if name in _INTROSPECTION_ROOTS:
                # Sized by the schema: counted against its own bound, not the operation's depth.
                return Bounds(1, 0, aliases + inner.aliases, max(below, inner.depth))
            return Bounds(inner.depth + 1, 0, aliases + inner.aliases, below)
        if not is_list:
            # A page object: its size argument sizes the list inside it.
            inner = self.walk(node.selection_set, target, asked)
            cost = own + inner.cost
            return Bounds(inner.depth + 1, cost, aliases + inner.aliases, inner.introspection_depth)
        size = asked or page or DEFAULT_LIST_SIZE
        inner = self.walk(node.selection_set, target)
        return Bounds(
            inner.depth + 1, own + size * inner.cost, aliases + inner.aliases, inner.introspection_depth
        )


def document_bounds(
    schema: GraphQLSchema, document: DocumentNode
) -> list[tuple[OperationDefinitionNode, str, Bounds]]:
    """Each operation of ``document`` with its name ("anonymous" when unnamed) and bounds."""
    definitions = document.definitions
    fragments = {d.name.value: d for d in definitions if isinstance(d, FragmentDefinitionNode)}
    walker = _Walker(schema, fragments)
    found: list[tuple[OperationDefinitionNode, str, Bounds]] = []
    for definition in definitions:
        if isinstance(definition, OperationDefinitionNode):
            root = schema.get_root_type(definition.operation)
            name = definition.name.value if definition.name else "anonymous"
            found.append((definition, name, walker.walk(definition.selection_set, root)))
    return found


def bounds_rule(
    max_depth: int, max_cost: int, max_aliases: int, max_introspection_depth: int = INTROSPECTION_DEPTH
) -> type[ValidationRule]:
    """A validation rule refusing operations deeper than ``max_depth``, costlier than
    ``max_cost`` or with introspection nested past ``max_introspection_depth``, and documents with
    more than ``max_aliases`` aliases; every operation of the document is checked, named or not."""

    class OperationBoundsRule(ValidationRule):
        """Reports operations over the depth, introspection depth or cost limit, and documents
        over the alias limit."""

        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            aliases = 0
            for node, name, bounds in document_bounds(context.schema, context.document):
                aliases += bounds.aliases
                for error in _over(node, name, bounds, (max_depth, max_cost, max_introspection_depth)):
                    context.report_error(error)
            if aliases > max_aliases:
                context.report_error(GraphQLError(f"{aliases} aliases found. Allowed: {max_aliases}"))

    return OperationBoundsRule


def _over(
    node: OperationDefinitionNode, name: str, bounds: Bounds, limits: tuple[int, int, int]
) -> list[GraphQLError]:
    """The errors of an operation past its limits (depth, cost, introspection depth)."""
    max_depth, max_cost, max_introspection = limits
    errors: list[GraphQLError] = []
    if bounds.depth > max_depth:
        errors.append(GraphQLError(f"'{name}' exceeds maximum operation depth of {max_depth}", [node]))
    if bounds.introspection_depth > max_introspection:
        errors.append(
            GraphQLError(
                f"'{name}' exceeds maximum introspection depth of {max_introspection} "
                "(levels below __schema or __type)",
                [node],
            )
        )
    if bounds.cost > max_cost:
        errors.append(
            GraphQLError(
                f"'{name}' custa {bounds.cost}, acima do limite de {max_cost} (cada campo conta uma vez "
                f"por objeto; context, result e metadataJson contam {HEAVY_WEIGHT}; listas "
                "multiplicam pelo tamanho da pagina). Peca menos itens ou menos campos.",
                [node],
                extensions={"code": "QUERY_TOO_COSTLY", "cost": bounds.cost, "maxCost": max_cost},
            )
        )
    return errors
