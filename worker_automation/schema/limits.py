"""Guards of the GraphQL endpoint: document size, tokens, depth, cost, aliases, introspection and
text no database can store (NUL, lone surrogates) in arguments or variables.

Every limit comes from the settings. Tokens are counted while parsing (a document with too many is
abandoned before it is fully read); size, depth and aliases are validation rules, so a refused
document never reaches a resolver and the caller gets a message naming the limit. The rules are
built once per schema and applied by a single extension, which keeps the per-payload cost of
subscriptions (every extension is visited for every payload) as low as it can be.

Validation as a whole costs time linear in the document: our own rules expand each fragment once
(see :mod:`worker_automation.schema.cost`), and the one stock rule that is not linear,
graphql-core's ``OverlappingFieldsCanBeMergedRule`` (it compares the fields that share a response
name pairwise, so a document repeating one field a few hundred times costs seconds), has its work
budget lowered to :data:`OVERLAP_BUDGET`: past it, the document is refused. With introspection
off, the schema strips suggestions from every error (:func:`without_suggestions`). With trusted
documents on (:mod:`worker_automation.schema.persisted`), any other document is refused here too,
whatever transport brought it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, Final

from graphql import ASTValidationRule, GraphQLError, ValidationRule
from graphql.language import DocumentNode, OperationDefinitionNode, StringValueNode
from graphql.validation import NoSchemaIntrospectionCustomRule
from graphql.validation.rules import overlapping_fields_can_be_merged
from graphql.validation.validate import ValidationAbortedError
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from worker_automation.domain.errors import BadInput
from worker_automation.domain.limits import check_storable, text_problem
from worker_automation.domain.sharing import Recent, parsed_document
from worker_automation.schema.cost import bounds_rule
from worker_automation.schema.persisted import REQUIRED_CODE, REQUIRED_MESSAGE, read_manifest
from worker_automation.schema.response_budget import current_budget, response_budget
from worker_automation.schema.text_bounds import TextBounds, named_by
from worker_automation.settings import Settings

# Large enough for any hand-written or generated operation of this API, small enough that parsing
# a refused document costs nothing worth noticing.
MAX_DOCUMENT_BYTES = 20_000
# Work units of graphql-core's overlapping-fields rule (two per pair of fields compared). The
# operations of this product spend none (no field is selected twice under one parent); a field
# with a selection repeated 64 times under one object spends 10,000, some 40 ms of CPU here.
# graphql-core reads this module attribute, documented as the knob, whenever the rule starts.
OVERLAP_BUDGET: Final = 10_000
overlapping_fields_can_be_merged.MAX_COMPLEXITY_BUDGET = OVERLAP_BUDGET
TOO_COMPLEX_MESSAGE: Final = (
    "Documento GraphQL complexo demais para validar: campos ou fragmentos repetidos demais sob o "
    "mesmo objeto. Selecione cada campo uma vez."
)
# graphql-core appends its suggestions as one last sentence (see ``graphql.pyutils.did_you_mean``).
_SUGGESTION: Final = re.compile(r" ?Did you mean .*$", re.DOTALL)


def document_size_rule(max_bytes: int) -> type[ValidationRule]:
    """A validation rule refusing documents longer than ``max_bytes`` (UTF-8)."""

    class DocumentSizeRule(ValidationRule):
        """Reports a document over the size limit."""

        def enter_document(self, node: DocumentNode, *_args: Any) -> None:
            body = node.loc.source.body if node.loc is not None else ""
            size = len(body.encode("utf-8"))
            if size > max_bytes:
                self.report_error(
                    GraphQLError(f"Documento GraphQL grande demais: {size} bytes (maximo {max_bytes} bytes).")
                )

    return DocumentSizeRule


class StorableTextRule(ValidationRule):
    """Reports string literals a database could not store, naming their argument."""

    def enter_string_value(
        self, node: StringValueNode, _key: Any, parent: Any, _path: Any, ancestors: Any
    ) -> None:
        problem = text_problem(node.value)
        if problem is not None:
            field = named_by([*ancestors, parent])
            self.report_error(
                GraphQLError(
                    f"{field} {problem}", [node], extensions={"code": "BAD_USER_INPUT", "field": field}
                )
            )


def variables_error(variables: dict[str, Any] | None) -> GraphQLError | None:
    """The error for variable values a database could not store (naming the innermost field)."""
    if not variables:
        return None
    try:
        check_storable(variables, "")
    except BadInput as exc:
        return GraphQLError(exc.message, extensions={"code": "BAD_USER_INPUT", "field": exc.field})
    return None


def _ambiguous(document: DocumentNode | None, operation_name: str | None) -> GraphQLError | None:
    """Several operations and no ``operationName``: which one to run is the caller's to say."""
    if document is None or operation_name:
        return None
    operations = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions)
    if operations < 2:
        return None
    message = f"O documento tem {operations} operacoes: diga qual executar em operationName."
    return GraphQLError(message, extensions={"code": "BAD_USER_INPUT", "field": "operationName"})


class DocumentCache:
    """This schema's view of the process's parsed documents: the token and size limits it parses
    with, and which documents passed its validation (a verdict that depends on nothing but the
    schema's rules and the document; see :mod:`worker_automation.domain.sharing`)."""

    def __init__(self, max_tokens: int, max_chars: int, keep: int = 256) -> None:
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        # Query text -> the parse that passed validation.
        self._valid: Recent[str, DocumentNode] = Recent(keep)

    def document(self, query: str) -> DocumentNode | None:
        """The parsed document, or None to let Strawberry parse it (and report its errors)."""
        if len(query) > self.max_chars:
            return None
        found: DocumentNode | None = parsed_document(query, self.max_tokens)
        return found

    def is_valid(self, query: str, document: DocumentNode | None) -> bool:
        """Whether ``document`` is the shared parse of ``query`` and passed validation before."""
        return document is not None and self._valid.peek(query) is document

    def mark_valid(self, query: str, document: DocumentNode | None) -> None:
        if document is not None and document is self.document(query):
            self._valid.put(query, document)


def explain_aborted(errors: Iterable[GraphQLError]) -> None:
    """Say why a validation stopped past the overlapping-fields budget (in place)."""
    for error in errors:
        if isinstance(error, ValidationAbortedError) and error.message == "Validation aborted.":
            error.message = TOO_COMPLEX_MESSAGE


def without_suggestions(errors: Iterable[GraphQLError]) -> None:
    """Drop the "Did you mean ..." sentence graphql-core adds to some errors (in place): with
    introspection off it would name fields, arguments, types and enum values to anyone."""
    for error in errors:
        if "Did you mean" in error.message:
            error.message = _SUGGESTION.sub("", error.message)


class Guards(SchemaExtension):
    """Applies the token limit to parsing and the guard rules to validation, reusing the parse and
    the validation of documents seen before; bounds the answer of a query or mutation run outside
    HTTP (over a websocket), whose transport opens no budget of its own."""

    def __init__(
        self,
        rules: tuple[type[ASTValidationRule], ...],
        cache: DocumentCache,
        max_response_bytes: int,
        text_bounds: TextBounds,
        trusted: frozenset[str] | None = None,
    ) -> None:
        self.rules = rules
        self.cache = cache
        self.max_response_bytes = max_response_bytes
        self.text_bounds = text_bounds
        self.trusted = trusted
        # The operationName the caller sent (None when it sent none), read in on_operation.
        self.provided_operation_name: str | None = None

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        if current_budget() is not None or context.operation_type is OperationType.SUBSCRIPTION:
            yield  # HTTP has its budget already; a subscription's payloads are one row each
            return
        with response_budget(self.max_response_bytes):
            yield

    def on_operation(self) -> Iterator[None]:
        context = self.execution_context
        # Before the document is parsed, Strawberry's operation_name is what the caller sent; from
        # then on it falls back to the first operation's name.
        self.provided_operation_name = context.operation_name
        context.parse_options["max_tokens"] = self.cache.max_tokens
        context.validation_rules = context.validation_rules + self.rules
        yield

    def on_parse(self) -> Iterator[None]:
        context = self.execution_context
        if context.graphql_document is None and context.query:
            context.graphql_document = self.cache.document(context.query)
        yield

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        query = context.query or ""
        known = self.cache.is_valid(query, context.graphql_document)
        refused = (
            untrusted(self.trusted, query)
            or variables_error(context.variables)
            or _ambiguous(context.graphql_document, self.provided_operation_name)
            or (self.text_bounds.variables_error(query, context.variables) if known else None)
        )
        if refused is not None:
            # Set before validation runs: Strawberry then skips it and answers with this error.
            context.pre_execution_errors = [refused]
            yield
            return
        if known:
            # Strawberry skips its own validation when an extension has already given the verdict.
            context.pre_execution_errors = []
        with self.text_bounds.checking(context.variables):
            yield
        if context.pre_execution_errors:
            explain_aborted(context.pre_execution_errors)
        elif not known:
            self.cache.mark_valid(query, context.graphql_document)


def untrusted(trusted: frozenset[str] | None, query: str) -> GraphQLError | None:
    """With trusted documents on, the error for a document not among them (HTTP refuses those
    before they reach the schema; this holds for websockets)."""
    if trusted is None or query in trusted:
        return None
    return GraphQLError(REQUIRED_MESSAGE, extensions={"code": REQUIRED_CODE})


def guard_rules(
    settings: Settings, max_document_bytes: int = MAX_DOCUMENT_BYTES, text_bounds: TextBounds | None = None
) -> tuple[type[ASTValidationRule], ...]:
    """The validation rules ``settings`` ask for."""
    rules: list[type[ASTValidationRule]] = [
        document_size_rule(max_document_bytes),
        bounds_rule(settings.max_query_depth, settings.graphql_max_cost, settings.max_query_aliases),
        StorableTextRule,
        (text_bounds or TextBounds()).rule(),
    ]
    if not settings.introspection:
        rules.append(NoSchemaIntrospectionCustomRule)
    return tuple(rules)


def guard_extension(settings: Settings, max_document_bytes: int = MAX_DOCUMENT_BYTES) -> Callable[[], Guards]:
    """A factory of the guard extension (Strawberry wants a new instance per operation); the rules
    and the document cache are built once, here, for one schema."""
    cache = DocumentCache(settings.max_query_tokens, max_chars=max_document_bytes)
    text_bounds = TextBounds()
    rules = guard_rules(settings, max_document_bytes, text_bounds)
    manifest = settings.graphql_trusted_documents
    trusted = None if manifest is None else frozenset(read_manifest(manifest).values())
    return partial(
        Guards,
        rules,
        cache,
        settings.graphql_max_response_bytes,
        text_bounds,
        trusted,
    )
