"""The pieces of the websocket budgets and of the permission rule, alone: answer budgets shared by a
socket's and a key's operations, what counts as a protocol message, access notices, and when a
key as it is now still grants what a socket was let in with."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from graphql import GraphQLError

from worker_automation.broker.access_changes import AccessChange
from worker_automation.models import Perfil
from worker_automation.resolvers.auth import SCOPE_READ, SCOPE_WRITE, Principal
from worker_automation.resolvers.machines import MachineView
from worker_automation.schema.open_sockets import Grant
from worker_automation.schema.response_budget import (
    TOO_LARGE_CODE,
    ResponseBudget,
    SharedBudget,
    response_budget,
    spend_json,
)
from worker_automation.schema.ws_handlers import malformed


def test_answers_in_flight_share_the_ceiling_and_give_it_back_once_sent() -> None:
    socket, key = SharedBudget(100, "desta conexao"), SharedBudget(150, "desta chave")
    first = ResponseBudget(100, (socket, key))
    first.spend(60)
    second = ResponseBudget(100, (socket, key))
    with pytest.raises(GraphQLError) as refused:
        second.spend(60)  # 120 in flight on the socket
    assert refused.value.extensions == {"code": TOO_LARGE_CODE}
    assert "desta conexao" in refused.value.message and second.exceeded
    other_socket = ResponseBudget(100, (SharedBudget(100, "desta conexao"), key))
    with pytest.raises(GraphQLError, match="desta chave"):
        other_socket.spend(40)  # 160 in flight across the key's sockets
    first.release()
    assert socket.in_flight == 60 and key.in_flight == 100
    second.release()
    other_socket.release()
    assert socket.in_flight == key.in_flight == 0
    # A released budget charges nothing more.
    first.spend(10)
    assert socket.in_flight == 0


def test_what_a_plan_gives_back_leaves_the_shared_budgets_too() -> None:
    shared = SharedBudget(1000, "desta conexao")
    budget = ResponseBudget(1000, (shared,))
    budget.spend(300)
    budget.spent = 100  # as plain_fields does when its plan gives up
    assert shared.in_flight == 100


def test_the_operation_budget_opened_around_a_query_charges_its_socket_until_it_ends() -> None:
    shared = SharedBudget(50, "desta conexao")
    with response_budget(1000, (shared,)) as budget:
        spend_json({"a": "x" * 20})
        assert shared.in_flight == budget.spent > 20
        with pytest.raises(GraphQLError):
            spend_json({"b": "y" * 30})
        with pytest.raises(GraphQLError, match="desta conexao"):
            spend_json(1)  # every value after the first refused one is refused
    assert shared.in_flight == 0


@pytest.mark.parametrize(
    ("message", "refused"),
    [
        ([], True),
        (1, True),
        ("connection_init", True),
        ({}, True),
        ({"type": 5}, True),
        ({"type": "subscribe", "id": 1, "payload": {"query": "{ a }"}}, True),
        ({"type": "subscribe", "id": "1", "payload": []}, True),
        ({"type": "start", "id": "1", "payload": {"query": None}}, True),
        ({"type": "stop"}, True),
        ({"type": "connection_init"}, False),
        ({"type": "ping"}, False),
        ({"type": "unknown"}, False),  # each protocol answers that one its own way
        ({"type": "subscribe", "id": "1", "payload": {"query": "{ a }", "variables": []}}, False),
        ({"type": "complete", "id": "1"}, False),
    ],
)
def test_what_is_no_protocol_message(message: Any, refused: bool) -> None:
    assert (malformed(message) is not None) is refused


def test_access_notices_travel_as_json_and_nothing_else_passes_for_one() -> None:
    for change in (AccessChange(key_id=3), AccessChange(machine_id=9), AccessChange(3, 9)):
        assert AccessChange.from_json(change.to_json()) == change
    for raw in ("[]", '{"key": "3"}', '{"machine": 1.5}', '{"key": true}', "nope"):
        with pytest.raises(ValueError):
            AccessChange.from_json(raw)


def principal(scopes: set[str], perfil: Perfil = Perfil.FUNCIONARIO) -> Principal:
    return Principal(1, "k", frozenset(scopes), perfil)


def machine(status: str = "ligado") -> MachineView:
    return MachineView(7, "m", "demo.echo", None, status, datetime(2026, 1, 1, tzinfo=UTC), None)


def test_a_socket_holds_while_the_key_grants_all_it_was_let_in_with() -> None:
    both = {SCOPE_READ, SCOPE_WRITE}
    reader = Grant(principal({SCOPE_READ}))
    assert reader.holds({1: principal(both, Perfil.DIRETORIA)}, {})  # raised: still holds
    assert not reader.holds({}, {})  # revoked
    assert not reader.holds({1: principal({SCOPE_WRITE})}, {})  # a scope taken away
    manager = Grant(principal(both, Perfil.ADMINISTRADOR))
    assert manager.holds({1: principal(both, Perfil.DIRETORIA)}, {})  # another manager perfil
    assert not manager.holds({1: principal(both)}, {})  # perfil lowered
    worker = Grant(machine=machine(), machine_key_hash="h1")
    assert worker.holds({}, {7: ("h1", True)})
    assert not worker.holds({}, {7: ("h1", False)})  # turned off
    assert not worker.holds({}, {7: ("h2", True)})  # a new key
    assert not worker.holds({}, {})  # deleted
    assert worker.holders == (("machine", 7),) and reader.holders == (("key", 1),)
