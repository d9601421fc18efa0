"""GraphQL object types derived from the resolvers' result dataclasses
(:mod:`worker_automation.domain.shapes`).

``@derived(View, description=...)`` on a class deriving from :class:`FromView` gives it one GraphQL
field per field of ``View``, in its order, typed and described as ``View`` says; the class body
adds what only GraphQL has (resolver fields, or a field whose GraphQL type differs: an annotation
of the same name replaces the derived type and keeps the description). ``from_view`` copies a
view's values, rendering instants in the service's zone and nested views as their GraphQL types.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime
from enum import Enum
from typing import Any, Self, TypeVar, get_args, get_origin, get_type_hints
from zoneinfo import ZoneInfo

import strawberry
from strawberry.types.base import get_object_definition

from worker_automation.domain.shapes import facets, strip_optional
from worker_automation.resolvers.job_views import iso
from worker_automation.schema.scalars import JSON, DateTime

T = TypeVar("T")
Convert = Callable[[Any, ZoneInfo | None], Any]
# Result dataclass -> (its GraphQL type, how a value becomes one).
_VIEWS: dict[type, tuple[Any, Convert]] = {}
# Derived GraphQL type -> the result dataclass it is derived from.
_SOURCES: dict[type, type] = {}
# Derived GraphQL type -> (field name, conversion or None for as is) of its copied fields, made on
# first use (the types a class body names are resolved by then).
_PLANS: dict[type, list[tuple[str, Convert | None]]] = {}


def register_view(view: type, graphql_type: Any, convert: Convert) -> None:
    """Declare how a nested ``view`` becomes ``graphql_type`` (types written by hand, e.g. Worker)."""
    _VIEWS[view] = (graphql_type, convert)


def _stamp(value: Any, tz: ZoneInfo | None) -> DateTime:
    return DateTime((iso(value, tz) if tz is not None else value.isoformat(timespec="seconds")) or "")


def _graphql_of(hint: Any) -> tuple[Any, Convert | None]:
    """The GraphQL annotation of a view's field type, and how its non-null values convert."""
    inner, optional = strip_optional(hint)
    found: tuple[Any, Convert | None]
    origin = get_origin(inner)
    if inner is datetime:
        found = (DateTime, _stamp)
    elif inner in _VIEWS:
        found = _VIEWS[inner]
    elif origin in (list, tuple):
        item_hint = get_args(inner)[0]
        item, item_convert = _graphql_of(item_hint)
        if item_convert is None:
            found = (list[item], lambda v, tz: list(v))  # type: ignore[valid-type]
        elif strip_optional(item_hint)[1]:
            convert = item_convert
            found = (list[item], lambda v, tz: [None if x is None else convert(x, tz) for x in v])  # type: ignore[valid-type]
        else:
            # Lists of rows (a queue's jobs) are the long ones: no per-item test when none is null.
            convert = item_convert
            found = (list[item], lambda v, tz: [convert(x, tz) for x in v])  # type: ignore[valid-type]
    elif inner is dict or origin is dict or inner is Any:
        found = (JSON, None)
    else:
        found = (inner, None)
    return (found[0] | None if optional else found[0]), found[1]


def _convert_to(graphql_type: Any) -> Convert | None:
    """How a view's value becomes a field typed by hand in the class body (an enum from its value)."""
    inner, _ = strip_optional(graphql_type)
    if isinstance(inner, type) and issubclass(inner, Enum):
        return lambda v, tz: v if isinstance(v, inner) else inner(v)
    return None


def derived(
    view: type, *, description: str, name: str | None = None, hide: tuple[str, ...] = ()
) -> Callable[[type[T]], type[T]]:
    """Make the decorated class the GraphQL object type of the result dataclass ``view`` (less the
    fields named in ``hide``, which only the resolvers use)."""

    def build(cls: type[T]) -> type[T]:
        own: dict[str, Any] = dict(inspect.get_annotations(cls))
        annotations: dict[str, Any] = {}
        for facet in facets(view):
            if facet.name in hide:
                continue
            given = cls.__dict__.get(facet.name)
            if facet.name in own:
                annotations[facet.name] = own.pop(facet.name)
            else:
                annotations[facet.name] = _graphql_of(facet.hint)[0]
            if given is None:
                setattr(cls, facet.name, strawberry.field(description=facet.doc))
        annotations.update(own)
        cls.__annotations__ = annotations
        made = strawberry.type(cls, name=name, description=description)
        _VIEWS[view] = (made, made.from_view)  # type: ignore[attr-defined]
        _SOURCES[made] = view
        return made

    return build


def _plan(cls: type) -> list[tuple[str, Convert | None]]:
    """Per copied field: how the view's value converts (from the view's type for a derived field,
    from the class body's type for one typed there; None: as is)."""
    from_view = {f.name: _graphql_of(f.hint)[1] for f in facets(_SOURCES[cls])}
    hints = get_type_hints(cls)
    plan: list[tuple[str, Convert | None]] = []
    for field in get_object_definition(cls, strict=True).fields:
        if field.base_resolver is None:
            name = field.python_name
            plan.append((name, from_view.get(name) or _convert_to(hints[name])))
    return plan


_ABSENT = object()


class FromView:
    """Base of the derived GraphQL types: ``from_view`` builds one from a resolver's result."""

    @classmethod
    def from_view(cls, view: Any, tz: ZoneInfo | None = None) -> Self:
        """Copy ``view``'s values (instants rendered in ``tz``)."""
        plan = _PLANS.get(cls)
        if plan is None:
            plan = _PLANS[cls] = _plan(cls)
        values: dict[str, Any] = {}
        for name, convert in plan:
            value = getattr(view, name, _ABSENT)
            if value is not _ABSENT:
                values[name] = value if convert is None or value is None else convert(value, tz)
        return cls(**values)
