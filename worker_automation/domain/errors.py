"""Domain errors raised by resolvers; each transport maps them to its status or code in one table."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of every expected failure of an operation. ``message`` is shown to the caller."""

    code = "INTERNAL"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(DomainError):
    """The target of the operation does not exist."""

    code = "NOT_FOUND"


class Conflict(DomainError):
    """The operation is illegal in the target's current state; nothing was changed."""

    code = "CONFLICT"


class BadInput(DomainError):
    """A parameter or body field is invalid; ``field`` names it."""

    code = "BAD_USER_INPUT"

    def __init__(self, field: str, message: str, **details: Any) -> None:
        super().__init__(message, field=field, **details)
        self.field = field


class Unauthenticated(DomainError):
    """No key, an unknown key or a revoked key."""

    code = "UNAUTHENTICATED"


class Forbidden(DomainError):
    """The key is valid but lacks the scope or the perfil the operation needs."""

    code = "FORBIDDEN"


# What an outage's answer tells clients to wait before trying again (seconds).
RETRY_AFTER_SECONDS = 5


class Unavailable(DomainError):
    """A backing service (broker, Redis) is down; ``details`` say what was kept."""

    code = "SERVICE_UNAVAILABLE"
