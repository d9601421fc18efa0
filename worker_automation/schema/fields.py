"""Typed forms of Strawberry's resolver decorators.

``strawberry.field(description=...)`` used as a decorator is typed as returning ``Any``, which
strict type checking refuses (it would erase the resolver's signature). These wrappers declare what
the decorators really do for resolver methods: hand back an object Strawberry reads at schema
build time, while type checkers keep seeing the method.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import strawberry
from strawberry.extensions import FieldExtension

F = TypeVar("F", bound=Callable[..., Any])


def field(description: str, extensions: list[FieldExtension] | None = None) -> Callable[[F], F]:
    """A resolver field (queries and computed fields of object types)."""
    return cast(Callable[[F], F], strawberry.field(description=description, extensions=extensions))


def mutation(description: str, extensions: list[FieldExtension] | None = None) -> Callable[[F], F]:
    """A mutation field."""
    return cast(Callable[[F], F], strawberry.mutation(description=description, extensions=extensions))


def subscription(description: str, extensions: list[FieldExtension] | None = None) -> Callable[[F], F]:
    """A subscription field (the resolver is an async generator)."""
    return cast(Callable[[F], F], strawberry.subscription(description=description, extensions=extensions))
