"""What a GraphQL request would run, read off its document before Strawberry executes it."""

from __future__ import annotations

from graphql import DocumentNode, OperationDefinitionNode

from worker_automation.domain.sharing import parsed_document
from worker_automation.schema.limits import MAX_DOCUMENT_BYTES


def chosen_operation(
    query: str, operation_name: str | None, max_tokens: int
) -> OperationDefinitionNode | None:
    """The operation a request would run (the only one, or the one named); None when the document
    is larger than the schema accepts, does not parse (within ``max_tokens``, the schema's limit)
    or names no such operation. The node is the process's one parse of the document (see
    :mod:`worker_automation.domain.sharing`): read it, never change it."""
    if len(query) > MAX_DOCUMENT_BYTES:
        return None  # refused later by the schema's own limits, and never parsed here
    document: DocumentNode | None = parsed_document(query, max_tokens)
    if document is None:
        return None
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is None:
        return operations[0] if len(operations) == 1 else None
    for operation in operations:
        if operation.name is not None and operation.name.value == operation_name:
            return operation
    return None
