"""Text no database stores, and answers that must still be sent: a refused key is named with its
bad characters escaped, and JSON with a lone surrogate is still written (as an escape)."""

from __future__ import annotations

import json

import pytest

from worker_automation.domain.errors import BadInput
from worker_automation.domain.json_codec import dumps
from worker_automation.domain.limits import check_storable, readable


def test_readable_escapes_only_what_cannot_be_stored() -> None:
    assert readable("rua") == "rua"
    assert readable("ação 🚀") == "ação 🚀"
    assert readable("a\x00b\ud800c\udfff") == "a\\u0000b\\ud800c\\udfff"


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"\ud800": 1}, "context.\\ud800"),
        ({"a": [{"b\x00": {"c": 1}}]}, "context.a[0].b\\u0000"),
        ({"ok": {"x\udc80": None}}, "context.ok.x\\udc80"),
    ],
)
def test_a_bad_key_is_named_readably(value: object, field: str) -> None:
    with pytest.raises(BadInput) as caught:
        check_storable(value, "context")
    assert caught.value.field == field
    caught.value.message.encode("utf-8")  # the message can be sent as it is
    assert caught.value.message.startswith(field)


def test_dumps_writes_a_lone_surrogate_as_an_escape() -> None:
    written = dumps({"field": "c.\ud800", "big": 2**70})
    written.decode("utf-8")
    assert json.loads(written) == {"field": "c.\ud800", "big": 2**70}
    assert dumps({"a": "é"}) == '{"a":"é"}'.encode()
