"""How many bytes of free JSON (contexts, results, metadata) one HTTP answer may still carry.

The HTTP transport opens a budget of ``WA_GRAPHQL_MAX_RESPONSE_BYTES`` around each operation it
runs (and the guard extension around a query or mutation sent over a websocket); the ``JSON``
scalar spends it as values are serialized, so an answer that would pass the limit stops growing
at the first value over it instead of being built whole and refused afterwards. Subscription
payloads run without one (each is one event's row or one view of the queues).

A websocket carries many operations at once, and a key may open many websockets: there the
ceiling holds for what is in flight together. Each operation's budget also charges the
:class:`SharedBudget` of its socket and of its key while its answer is being built and sent, and
gives the bytes back once it has been sent; an answer that would pass what is left is refused as
one past its own limit is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from graphql import GraphQLError

from worker_automation.domain.limits import json_size

# extensions.code of an answer refused for its size.
TOO_LARGE_CODE: Final = "RESPONSE_TOO_LARGE"


def too_large_message(limit: int) -> str:
    return (
        f"Resposta grande demais (maximo {limit} bytes): peca menos itens por pagina ou menos "
        "campos (context, result, metadataJson)."
    )


class SharedBudget:
    """Bytes of answers in flight of several operations together (one socket's, one key's)."""

    def __init__(self, limit: int, holder: str) -> None:
        self.limit = limit
        # Named in the refusal: "desta conexao", "desta chave".
        self.holder = holder
        self.in_flight = 0

    @property
    def message(self) -> str:
        return (
            f"Resposta grande demais: as respostas em andamento {self.holder} passariam de "
            f"{self.limit} bytes; espere as outras terminarem ou peca menos itens ou campos."
        )


class ResponseBudget:
    """The bytes left for one answer, charged to the shared budgets it belongs to as well."""

    def __init__(self, limit: int, shared: tuple[SharedBudget, ...] = ()) -> None:
        self.limit = limit
        self.exceeded = False
        self.message = too_large_message(limit)
        self._spent = 0
        self._shared = shared

    @property
    def spent(self) -> int:
        return self._spent

    @spent.setter
    def spent(self, value: int) -> None:
        # Set back as well as forward (a plan that gives up returns what it charged).
        delta, self._spent = value - self._spent, value
        for shared in self._shared:
            shared.in_flight += delta

    def spend(self, size: int) -> None:
        self.spent += size
        if self._spent > self.limit:
            self._refuse(self.message)
        for shared in self._shared:
            if shared.in_flight > shared.limit:
                self._refuse(shared.message)

    def _refuse(self, message: str) -> None:
        self.exceeded = True
        self.message = message
        raise GraphQLError(message, extensions={"code": TOO_LARGE_CODE})

    def release(self) -> None:
        """The answer has left: what it spent no longer counts against the shared budgets."""
        for shared in self._shared:
            shared.in_flight -= self._spent
        self._shared = ()


_CURRENT: ContextVar[ResponseBudget | None] = ContextVar("wa_response_budget", default=None)


@contextmanager
def response_budget(limit: int, shared: tuple[SharedBudget, ...] = ()) -> Iterator[ResponseBudget]:
    """A budget for the operations run inside (tasks they start share it), charged to ``shared``
    until the block ends."""
    budget = ResponseBudget(limit, shared)
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        budget.release()
        _CURRENT.reset(token)


def current_budget() -> ResponseBudget | None:
    return _CURRENT.get()


def spend_json(value: object) -> object:
    """Serialize a JSON scalar: ``value`` itself, counted against the current budget."""
    budget = _CURRENT.get()
    if budget is not None and value is not None:
        if budget.exceeded:
            raise GraphQLError(budget.message, extensions={"code": TOO_LARGE_CODE})
        budget.spend(json_size(value))
    return value
