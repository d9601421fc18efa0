"""How many bytes of free JSON (contexts, results, metadata) one HTTP answer may still carry.

The HTTP transport opens a budget of ``WA_GRAPHQL_MAX_RESPONSE_BYTES`` around each operation it
runs (and the guard extension around a query or mutation sent over a websocket); the ``JSON``
scalar spends it as values are serialized, so an answer that would pass the limit stops growing
at the first value over it instead of being built whole and refused afterwards. Subscription
payloads run without one (each is one event's row or one view of the queues).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from graphql import GraphQLError

from worker_automation.limits import json_size

# extensions.code of an answer refused for its size.
TOO_LARGE_CODE: Final = "RESPONSE_TOO_LARGE"


def too_large_message(limit: int) -> str:
    return (
        f"Resposta grande demais (maximo {limit} bytes): peca menos itens por pagina ou menos "
        "campos (context, result, metadataJson)."
    )


class ResponseBudget:
    """The bytes left for one answer."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0
        self.exceeded = False

    def spend(self, size: int) -> None:
        self.spent += size
        if self.spent > self.limit:
            self.exceeded = True
            raise GraphQLError(too_large_message(self.limit), extensions={"code": TOO_LARGE_CODE})


_CURRENT: ContextVar[ResponseBudget | None] = ContextVar("wa_response_budget", default=None)


@contextmanager
def response_budget(limit: int) -> Iterator[ResponseBudget]:
    """A budget for the operations run inside (tasks they start share it)."""
    budget = ResponseBudget(limit)
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def current_budget() -> ResponseBudget | None:
    return _CURRENT.get()


def spend_json(value: object) -> object:
    """Serialize a JSON scalar: ``value`` itself, counted against the current budget."""
    budget = _CURRENT.get()
    if budget is not None and value is not None:
        if budget.exceeded:
            raise GraphQLError(too_large_message(budget.limit), extensions={"code": TOO_LARGE_CODE})
        budget.spend(json_size(value))
    return value
