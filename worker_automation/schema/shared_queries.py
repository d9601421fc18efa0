"""Identical GraphQL queries sent at the same moment share one execution.

Every open dashboard polls the same few queries. Executing each of them once per caller makes
the server's work grow with the number of screens (a ``queueLiveStatus`` with its task lists
resolves some two thousand fields). A query whose result depends on nothing but its document,
its variables and the caller's rights, which holds for every query of this schema, is executed
once for all callers that send the same request body with the same scopes and perfil; through
:class:`~worker_automation.domain.sharing.SharedReads` each caller still gets a result
computed after it asked. Mutations and anything sent with a machine key are never shared.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from typing import Any

from graphql import OperationType

from worker_automation.resolvers.auth import Principal
from worker_automation.schema.documents import chosen_operation


def operation_type(query: str, operation_name: str | None, max_tokens: int) -> OperationType | None:
    """The type of the operation a request would run; None when it cannot tell."""
    operation = chosen_operation(query, operation_name, max_tokens)
    return None if operation is None else operation.operation


def sharing_key(
    body: bytes,
    principal: Principal,
    max_tokens: int,
    stored: Callable[[dict[str, Any]], str | None] | None = None,
) -> Hashable | None:
    """What identifies a query's answer for ``principal``; None for anything not to be shared
    (``max_tokens``: the schema's token limit, which the document is parsed with; ``stored``: the
    text the body names, by itself or as a persisted document, if it is one that may run)."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    query, name = payload.get("query"), payload.get("operationName")
    if stored is not None:
        query = stored(payload)
    if not isinstance(query, str) or not (name is None or isinstance(name, str)):
        return None
    if operation_type(query, name, max_tokens) is not OperationType.QUERY:
        return None
    return ("graphql", body, principal.scopes, principal.perfil)
