"""Identical GraphQL queries sent at the same moment share one execution.

Every open dashboard polls the same few queries. Executing each of them once per caller makes
the server's work grow with the number of screens (a ``queueLiveStatus`` with its task lists
resolves some two thousand fields). A query whose result depends on nothing but its document,
its variables and the caller's rights, which holds for every query of this schema, is executed
once for all callers that send the same request body with the same scopes and perfil; through
:class:`~worker_automation.models.shared_reads.SharedReads` each caller still gets a result
computed after it asked. Mutations and anything sent with a machine key are never shared.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from functools import lru_cache

from graphql import GraphQLError, OperationDefinitionNode, OperationType, parse

from worker_automation.resolvers.auth import Principal


@lru_cache(maxsize=256)
def operation_type(query: str, operation_name: str | None) -> OperationType | None:
    """The type of the operation a request would run; None when it cannot tell."""
    try:
        document = parse(query)
    except GraphQLError:
        return None
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is None:
        return operations[0].operation if len(operations) == 1 else None
    for operation in operations:
        if operation.name is not None and operation.name.value == operation_name:
            return operation.operation
    return None


def sharing_key(body: bytes, principal: Principal) -> Hashable | None:
    """What identifies a query's answer for ``principal``; None for anything not to be shared."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(payload, dict):
        return None
    query, name = payload.get("query"), payload.get("operationName")
    if not isinstance(query, str) or not (name is None or isinstance(name, str)):
        return None
    if operation_type(query, name) is not OperationType.QUERY:
        return None
    return ("graphql", body, principal.scopes, principal.perfil)
