"""Result shapes written once: the fields of a resolver's result dataclass, read with what their
annotations say about them.

A result dataclass states each field once, with its type, its description and its bounds::

    cancelled: Annotated[int, Doc("Jobs marked CANCELADO."), Ge(0)]

and every transport derives its own rendering from that: the GraphQL object type
(:mod:`worker_automation.schema.derived`), the OpenAPI schema
(:mod:`worker_automation.rest_compat.schemas`) and the REST ``data`` (:func:`as_dict`). A read-only
property whose return annotation carries a :class:`Doc` is part of the shape too, after the fields
(a figure computed from them, such as a summary message).

This module imports nothing of the package: every layer may use it.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import annotated_types
from typing_extensions import Doc

__all__ = ["Doc", "Facet", "as_dict", "facets", "strip_optional"]


@dataclass(frozen=True)
class Facet:
    """One field of a shape: its name, its bare type (``Annotated`` removed) and what the
    annotation says about it."""

    name: str
    hint: Any
    doc: str | None
    minimum: Any
    maximum: Any


def strip_optional(hint: Any) -> tuple[Any, bool]:
    """``(X, True)`` for ``X | None``, ``(hint, False)`` otherwise."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(args) < len(get_args(hint)):
            return args[0], True
    return hint, False


def _facet(name: str, hint: Any) -> Facet:
    doc: str | None = None
    minimum: Any = None
    maximum: Any = None
    if get_origin(hint) is Annotated:
        hint, *extras = get_args(hint)
        for extra in extras:
            if isinstance(extra, Doc):
                doc = extra.documentation
            elif isinstance(extra, annotated_types.Ge):
                minimum = extra.ge
            elif isinstance(extra, annotated_types.Le):
                maximum = extra.le
            elif isinstance(extra, annotated_types.Interval):
                if extra.ge is not None:
                    minimum = extra.ge
                if extra.le is not None:
                    maximum = extra.le
    return Facet(name, hint, doc, minimum, maximum)


@cache
def facets(cls: type) -> tuple[Facet, ...]:
    """The fields of the dataclass ``cls`` in their order, then its documented properties."""
    hints = get_type_hints(cls, include_extras=True)
    found = [_facet(f.name, hints[f.name]) for f in dataclasses.fields(cls)]
    for name, member in vars(cls).items():
        if isinstance(member, property) and member.fget is not None:
            returned = get_type_hints(member.fget, include_extras=True).get("return")
            if get_origin(returned) is Annotated and any(isinstance(e, Doc) for e in get_args(returned)):
                found.append(_facet(name, returned))
    return tuple(found)


def as_dict(obj: Any, names: Iterable[str] | None = None) -> dict[str, Any]:
    """The shape's values by name, in its order (``names`` to keep some of them, in that order).

    Plain values, an enum as its value: the shapes this renders hold numbers, text and maps of them."""
    keys = [f.name for f in facets(obj.__class__)] if names is None else names
    found = {key: getattr(obj, key) for key in keys}
    for key, value in found.items():
        if isinstance(value, Enum):
            found[key] = value.value
    return found
