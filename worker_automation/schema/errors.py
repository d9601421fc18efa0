"""Domain errors -> GraphQL errors with ``extensions.code`` (the code each error class names).

Resolvers raise :class:`~worker_automation.domain.errors.DomainError` subclasses and nothing here is
caught field by field: the schema hands every result's errors to :func:`translate_in_place` once,
before the result is sent (Strawberry's ``process_errors`` step, which runs exactly once per
result, streamed payloads included), so the mapping lives in one place and costs nothing on results
without errors. Errors that are not domain errors and happened while resolving a field are bugs
or outages of our own: their message is replaced by "Erro interno" after the original has been
logged with its traceback; a database outage or a full disk is logged once per result, in one
line, and answered ``SERVICE_UNAVAILABLE``.
"""

from __future__ import annotations

import logging
from typing import Any

from graphql import GraphQLError, GraphQLSyntaxError

from worker_automation.domain.errors import (
    DomainError,
    Unavailable,
)
from worker_automation.models.database import database_unavailable, report_outage

log = logging.getLogger(__name__)

INTERNAL_CODE = "INTERNAL_SERVER_ERROR"
UNAVAILABLE_CODE = Unavailable.code
DATABASE_DOWN_MESSAGE = "Banco de dados indisponivel; tente novamente em instantes."
# A websocket subscriber that fell too far behind a live view (see schema.live_views).
TOO_SLOW_CODE = "SUBSCRIBER_TOO_SLOW"
INTERNAL_MESSAGE = "Erro interno"
PARSE_FAILED = "GRAPHQL_PARSE_FAILED"
VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"


def code_of(exc: DomainError) -> str:
    """The code of ``exc``, as each domain error class names it (the same in every transport)."""
    return exc.code if exc.code != DomainError.code else INTERNAL_CODE


def is_expected(error: GraphQLError) -> bool:
    """Domain errors and the caller's own mistakes (syntax, validation, limits, a value a scalar
    refused before execution began): not worth a log line with a traceback, unlike everything else."""
    original = error.original_error
    return (
        original is None
        or error.path is None
        or isinstance(original, DomainError | GraphQLError)
        or database_unavailable(original)
    )


def _json_safe(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def translate(error: GraphQLError) -> GraphQLError:
    """The error as the caller sees it (idempotent: translating twice changes nothing)."""
    original = error.original_error
    if isinstance(original, DomainError):
        extensions: dict[str, Any] = {"code": code_of(original)}
        # Details such as the refused field or a claim's reason help clients react; only plain
        # values are passed on, never objects that could leak internals.
        extensions.update({k: v for k, v in original.details.items() if _json_safe(v)})
        return GraphQLError(original.message, nodes=error.nodes, path=error.path, extensions=extensions)
    if error.extensions and "code" in error.extensions:
        return error
    if isinstance(error, GraphQLSyntaxError):
        return _with_code(error, PARSE_FAILED)
    if original is None or isinstance(original, GraphQLError):
        # Validation, coercion of variables and arguments, limits: messages written for callers.
        return _with_code(error, VALIDATION_FAILED if error.path is None else INTERNAL_CODE)
    if database_unavailable(original):
        return GraphQLError(
            DATABASE_DOWN_MESSAGE, nodes=error.nodes, path=error.path, extensions={"code": UNAVAILABLE_CODE}
        )
    if error.path is None:
        # Raised before execution (invalid variable values): about the caller's input.
        return _with_code(error, "BAD_USER_INPUT")
    return GraphQLError(
        INTERNAL_MESSAGE, nodes=error.nodes, path=error.path, extensions={"code": INTERNAL_CODE}
    )


def _with_code(error: GraphQLError, code: str) -> GraphQLError:
    return GraphQLError(
        error.message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        extensions={**(error.extensions or {}), "code": code},
    )


def translate_in_place(errors: list[GraphQLError]) -> None:
    """Apply :func:`translate` to a result's own error list (what the caller will be sent); an
    outage behind any of them is logged once for the result, without a traceback."""
    outage = next(
        (
            e.original_error
            for e in errors
            if e.original_error is not None and database_unavailable(e.original_error)
        ),
        None,
    )
    if outage is not None:
        report_outage(log, outage, "GraphQL")
    errors[:] = [translate(e) for e in errors]
