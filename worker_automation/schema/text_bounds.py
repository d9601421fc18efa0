"""Every GraphQL string argument is bounded like its REST twin: at most :data:`MAX_TEXT_CHARS`.

The REST routes refuse free-text parameters (``q``, ``task_id``, ``queue``, ...) past 255
characters; the same values reach the same resolvers through GraphQL, as literals or in
variables, where nothing else bounded them (a 50,000-character ``filter.q`` reached the database as
a LIKE pattern). Only the String and ID scalars are bounded: text inside a JSON scalar (a job's
context) has limits of its own.

Literals are checked by a validation rule, named by their argument (``filter.q``). Variables are
checked against the types the document declares for them, named like any other variable problem
(``q``, ``f.q``): by the rule when the document is validated, and before execution when its
validation was reused (the declared types are kept with the verdict).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from graphql import (
    GraphQLError,
    GraphQLInputObjectType,
    GraphQLInputType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLScalarType,
    OperationDefinitionNode,
    ValidationRule,
    is_input_type,
    type_from_ast,
)
from graphql.language import ArgumentNode, DocumentNode, ObjectFieldNode, StringValueNode

from worker_automation.domain.sharing import Recent

# What the REST routes accept for any free-text parameter (``rest_compat.http.text_param``).
MAX_TEXT_CHARS: Final = 255
_TEXT_SCALARS: Final = frozenset({"String", "ID"})
# The variables of the operation being validated (the rule has no other way to see them).
_VARIABLES: ContextVar[Mapping[str, Any] | None] = ContextVar(
    "worker_automation_graphql_variables", default=None
)

VariableTypes = dict[str, list[GraphQLInputType]]


def named_by(ancestors: Any) -> str:
    """The argument (``filter.q``) a literal belongs to, from the nodes above it."""
    names = [node.name.value for node in ancestors if isinstance(node, ArgumentNode | ObjectFieldNode)]
    return ".".join(names) or "query"


def too_long(field: str, nodes: Any = None) -> GraphQLError:
    return GraphQLError(
        f"{field} deve ter no maximo {MAX_TEXT_CHARS} caracteres",
        nodes,
        extensions={"code": "BAD_USER_INPUT", "field": field},
    )


def _is_text(type_: Any) -> bool:
    while isinstance(type_, GraphQLNonNull):
        type_ = type_.of_type
    return isinstance(type_, GraphQLScalarType) and type_.name in _TEXT_SCALARS


def _long_text(value: Any, type_: Any, path: str) -> str | None:
    """The path of the first text over the bound in ``value`` read as ``type_``, or None."""
    pending: list[tuple[Any, Any, str]] = [(value, type_, path)]
    while pending:
        item, kind, where = pending.pop()
        while isinstance(kind, GraphQLNonNull):
            kind = kind.of_type
        if isinstance(kind, GraphQLScalarType):
            if kind.name in _TEXT_SCALARS and isinstance(item, str) and len(item) > MAX_TEXT_CHARS:
                return where
        elif isinstance(kind, GraphQLList):
            items = item if isinstance(item, list) else [item]
            pending.extend((child, kind.of_type, f"{where}[{i}]") for i, child in enumerate(items))
        elif isinstance(kind, GraphQLInputObjectType) and isinstance(item, dict):
            for name, child in item.items():
                field = kind.fields.get(name)
                if field is not None:
                    pending.append((child, field.type, f"{where}.{name}"))
    return None


def variables_too_long(variables: object, types: VariableTypes) -> GraphQLError | None:
    """The error for the first variable text over the bound (by the types declared for it);
    variables that are not an object are graphql-core's to refuse."""
    if not isinstance(variables, Mapping):
        return None
    for name, value in variables.items():
        for declared in types.get(name, ()):
            where = _long_text(value, declared, name)
            if where is not None:
                return too_long(where)
    return None


class TextBounds:
    """The declared variable types of the documents whose validation is reused, and the rule
    that fills them in as it validates."""

    def __init__(self, keep: int = 256) -> None:
        self._types: Recent[str, VariableTypes] = Recent(keep)

    @contextmanager
    def checking(self, variables: Mapping[str, Any] | None) -> Iterator[None]:
        """Let the rule see ``variables`` while a document is validated."""
        token = _VARIABLES.set(variables)
        try:
            yield
        finally:
            _VARIABLES.reset(token)

    def variables_error(self, query: str, variables: Mapping[str, Any] | None) -> GraphQLError | None:
        """For a document validated before: its variables' text over the bound."""
        types = self._types.peek(query)
        return None if not variables or types is None else variables_too_long(variables, types)

    def rule(self) -> type[ValidationRule]:
        """A validation rule refusing text over the bound, in literals and variables alike."""
        kept = self._types

        class TextBoundsRule(ValidationRule):
            """Reports String or ID literals and variables over :data:`MAX_TEXT_CHARS`."""

            def enter_document(self, node: DocumentNode, *_args: Any) -> None:
                types: VariableTypes = {}
                for definition in node.definitions:
                    if isinstance(definition, OperationDefinitionNode):
                        for variable in definition.variable_definitions or ():
                            declared = type_from_ast(self.context.schema, variable.type)
                            if is_input_type(declared):
                                name = variable.variable.name.value
                                types.setdefault(name, []).append(declared)
                if node.loc is not None:
                    kept.put(node.loc.source.body, types)
                error = variables_too_long(_VARIABLES.get(), types)
                if error is not None:
                    self.report_error(error)

            def enter_string_value(
                self, node: StringValueNode, _key: Any, parent: Any, _path: Any, ancestors: Any
            ) -> None:
                if len(node.value) > MAX_TEXT_CHARS and _is_text(self.context.get_input_type()):
                    self.report_error(too_long(named_by([*ancestors, parent]), [node]))

        return TextBoundsRule
