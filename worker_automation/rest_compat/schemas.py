"""OpenAPI schemas of the REST ``data`` derived from the resolvers' result dataclasses
(:mod:`worker_automation.domain.shapes`), and the fields each REST answer shows.

A REST shape is a result dataclass, or some of its fields in the order the answer gives them; its
schema says what the dataclass's annotations say (types, bounds, null), so the document and the
answers cannot drift apart.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, get_args, get_origin

from worker_automation.broker.inspect import InspectResult
from worker_automation.domain.shapes import Facet, facets, strip_optional
from worker_automation.resolvers import live, maintenance
from worker_automation.resolvers import reads as read_ops
from worker_automation.resolvers.job_views import ENUM_FIELDS, INSTANT_FIELDS, ITEM_FIELDS, JobView

_LOAD = ("queue_name", "workers_count", "active_count", "pending_count", "capacity", "load_percent")
_TASKS = ("active_tasks", "pending_tasks")

# Component name -> (result dataclass, the fields REST shows, in order; None for all of them).
REST_SHAPES: dict[str, tuple[type, tuple[str, ...] | None]] = {
    "Stats": (read_ops.Stats, None),
    "Summary": (live.Summary, None),
    "QueueLoad": (live.QueueState, _LOAD),
    "QueueLive": (live.QueueState, _LOAD + _TASKS),
    "QueueLiveStatus": (live.QueueLiveStatus, None),
    "BrokerStatus": (live.BrokerStatus, None),
    "WorkersInspect": (InspectResult, None),
    "ClearResult": (maintenance.ClearResult, ("cancelled", "scope")),
    "PurgeResult": (maintenance.PurgeResult, ("queue_name", "redis_keys_deleted")),
    "CleanupResult": (maintenance.CleanupResult, ("deleted",)),
    "SyncResult": (maintenance.SyncResult, ("orphans_found", "total_checked")),
}
# The fields of each REST shape, in the answer's order.
REST_FIELDS: dict[str, tuple[str, ...]] = {
    name: names if names is not None else tuple(f.name for f in facets(shape))
    for name, (shape, names) in REST_SHAPES.items()
}
# A nested result is a reference to its component.
_COMPONENTS: dict[type, str] = {
    JobView: "WorkerItem",
    live.QueueState: "QueueLive",
    live.Summary: "Summary",
}
_SCALARS: dict[Any, str] = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _type_schema(hint: Any) -> dict[str, Any]:
    origin = get_origin(hint)
    if hint in _COMPONENTS:
        return _ref(_COMPONENTS[hint])
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is datetime:
        return {"type": "string", "format": "date-time"}
    if hint is Any:
        return {}
    if isinstance(hint, type) and issubclass(hint, Enum):
        return {"type": "string", "enum": [member.value for member in hint]}
    if origin in (list, tuple):
        return {"type": "array", "items": _type_schema(get_args(hint)[0])}
    if origin is dict:
        values = get_args(hint)[1]
        if values is Any:
            return {"type": "object"}
        return {"type": "object", "additionalProperties": _type_schema(values)}
    raise TypeError(f"no OpenAPI schema for {hint!r}")


def _property(facet: Facet) -> dict[str, Any]:
    hint, optional = strip_optional(facet.hint)
    schema = _type_schema(hint)
    if facet.minimum is not None:
        schema["minimum"] = facet.minimum
    if facet.maximum is not None:
        schema["maximum"] = facet.maximum
    if optional:
        schema["nullable"] = True
    return schema


def shape_schema(name: str) -> dict[str, Any]:
    """The OpenAPI object schema of the REST shape ``name``."""
    by_name = {f.name: f for f in facets(REST_SHAPES[name][0])}
    shown = [by_name[n] for n in REST_FIELDS[name]]
    return {
        "type": "object",
        "required": [f.name for f in shown if not strip_optional(f.hint)[1]],
        "properties": {f.name: _property(f) for f in shown},
    }


def shape_schemas(*names: str) -> dict[str, dict[str, Any]]:
    """The components ``names``, in that order."""
    return {name: shape_schema(name) for name in names}


def _job_property(facet: Facet) -> dict[str, Any]:
    if facet.name in ENUM_FIELDS:
        return _type_schema(ENUM_FIELDS[facet.name])
    schema = _property(facet)
    if facet.name in INSTANT_FIELDS:
        # Instants are documented as text that may be null, whether or not the row allows it.
        schema["nullable"] = True
    return schema


def job_schemas() -> dict[str, dict[str, Any]]:
    """``WorkerItem``, the documented REST item (every key present, null where the job allows),
    and ``Job``, that item and the details events and the worker protocol carry: both from
    :class:`JobView`."""
    shown = {f.name: _job_property(f) for f in facets(JobView)}
    return {
        "WorkerItem": {
            "type": "object",
            "required": list(ITEM_FIELDS),
            "properties": {name: shown[name] for name in ITEM_FIELDS},
        },
        "Job": {
            "allOf": [
                _ref("WorkerItem"),
                {"type": "object", "properties": {n: p for n, p in shown.items() if n not in ITEM_FIELDS}},
            ]
        },
    }
