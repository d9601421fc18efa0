"""Notices that a key's or a machine's permission may have narrowed.

Published by whatever revokes a key, lowers its scopes or perfil, turns a machine off or gives it a
new key, after the change is committed, on the event bus's access channel; every process holding
websockets of that key or machine checks them again at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class AccessChange:
    """A key's or a machine's permission may have narrowed: who holds it must check it again."""

    key_id: int | None = None
    machine_id: int | None = None

    def to_json(self) -> str:
        return json.dumps({"key": self.key_id, "machine": self.machine_id}, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | bytes) -> AccessChange:
        """Parse :meth:`to_json` output; ValueError for anything else."""
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not an access change")
        key_id, machine_id = data.get("key"), data.get("machine")
        if not all(value is None or type(value) is int for value in (key_id, machine_id)):
            raise ValueError("not an access change")
        return cls(key_id, machine_id)


# Told of every access change heard; None when changes may have been missed (after an outage).
AccessWatcher = Callable[[AccessChange | None], None]
