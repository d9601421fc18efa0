"""Result shapes are written once and every transport derives its rendering from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import strawberry
from annotated_types import Ge, Interval
from strawberry.schema.config import StrawberryConfig

from worker_automation.domain.shapes import Doc, as_dict, facets
from worker_automation.resolvers import live, maintenance, reads
from worker_automation.resolvers.maintenance import ClearScope
from worker_automation.rest_compat.openapi import openapi_document
from worker_automation.rest_compat.schemas import REST_FIELDS, REST_SHAPES, shape_schema
from worker_automation.schema.derived import FromView, derived
from worker_automation.schema.monitoring import QueueLiveStatus, Stats
from worker_automation.schema.results import ClearQueueResult
from worker_automation.schema.scalars import SCALAR_MAP
from worker_automation.settings import Settings

SAO_PAULO = ZoneInfo("America/Sao_Paulo")


@dataclass(frozen=True)
class Sample:
    """A shape with every kind of field the derivations read."""

    count: Annotated[int, Doc("How many."), Ge(0)]
    share: Annotated[float, Doc("Part of the whole."), Interval(ge=0, le=100)]
    at: Annotated[datetime | None, Doc("When.")]
    notes: Annotated[dict[str, Any] | None, Doc("Free notes.")] = None
    tags: list[str] = field(default_factory=list)
    secret: str = "kept by the resolvers"

    @property
    def label(self) -> Annotated[str, Doc("A computed summary.")]:
        return f"{self.count} item(s)"

    @property
    def undocumented(self) -> str:
        return "not part of the shape"


@derived(Sample, description="A sample.", hide=("secret",))
class SampleType(FromView):
    """The GraphQL rendering of Sample."""


@strawberry.type
class SampleQuery:
    @strawberry.field
    def sample(self) -> SampleType | None:
        return None


def test_facets_read_fields_then_documented_properties_with_docs_and_bounds() -> None:
    found = {f.name: f for f in facets(Sample)}
    assert list(found) == ["count", "share", "at", "notes", "tags", "secret", "label"]
    assert (found["count"].doc, found["count"].minimum, found["count"].maximum) == ("How many.", 0, None)
    assert (found["share"].minimum, found["share"].maximum) == (0, 100)
    assert found["tags"].doc is None


def test_derived_graphql_type_has_the_fields_in_order_with_their_descriptions() -> None:
    schema = strawberry.Schema(query=SampleQuery, config=StrawberryConfig(scalar_map=SCALAR_MAP))
    sdl = str(schema)
    assert '"""A sample."""\ntype SampleType {' in sdl
    block = sdl.split("type SampleType {")[1].split("}")[0]
    names = [line.split(":")[0].strip() for line in block.splitlines() if ":" in line and '"""' not in line]
    assert names == ["count", "share", "at", "notes", "tags", "label"]
    assert '"""How many."""\n  count: Int!' in block
    assert "at: DateTime" in block and "notes: JSON" in block and "label: String!" in block
    assert "secret" not in block


def test_from_view_renders_instants_in_the_zone_and_copies_the_rest() -> None:
    sample = Sample(3, 12.5, datetime(2026, 7, 8, 12, 15, tzinfo=UTC), {"a": 1}, ["x"])
    built = SampleType.from_view(sample, SAO_PAULO)
    assert vars(built) == {
        "count": 3,
        "share": 12.5,
        "at": "2026-07-08T09:15:00-03:00",
        "notes": {"a": 1},
        "tags": ["x"],
        "label": "3 item(s)",
    }
    # Derived types get their fields when decorated: read through vars(), as mypy cannot see them.
    assert vars(SampleType.from_view(Sample(0, 0.0, None), SAO_PAULO))["at"] is None


def test_derived_types_convert_enums_and_nested_results() -> None:
    cleared = vars(ClearQueueResult.from_view(maintenance.ClearResult(2, ClearScope.QUEUED, "scan")))
    assert (cleared["scope"], cleared["queue"]) == (ClearScope.QUEUED, "scan")
    assert cleared["message"] == "2 worker(s) cancelado(s) com sucesso"
    status = vars(
        QueueLiveStatus.build([live.QueueState("scan", 4, 1, 2)], live.Summary(1, 2, 3, 4), SAO_PAULO)
    )
    queue = status["queues"][0]
    assert (queue.capacity, queue.load_percent, queue.active_tasks) == (4, 25.0, [])
    assert status["summary"].total_errors_today == 4
    stats = Stats.from_view(reads.Stats(3, {"AGENDADO": 3}, {"scan": 3}))
    assert [(c.key, c.count) for c in stats.status_counts()] == [("AGENDADO", 3)]


def test_rest_dicts_keep_the_shape_order_and_give_enums_as_values() -> None:
    result = maintenance.ClearResult(18, ClearScope.ALL, None)
    assert as_dict(result, REST_FIELDS["ClearResult"]) == {"cancelled": 18, "scope": "all"}
    assert list(as_dict(live.Summary(1, 2, 3, 4))) == [
        "total_active",
        "total_pending",
        "total_completed_today",
        "total_errors_today",
    ]


def test_openapi_schemas_say_what_the_annotations_say() -> None:
    assert shape_schema("ClearResult") == {
        "type": "object",
        "required": ["cancelled", "scope"],
        "properties": {
            "cancelled": {"type": "integer", "minimum": 0},
            "scope": {"type": "string", "enum": ["all", "queued", "running"]},
        },
    }
    live_queue = shape_schema("QueueLive")["properties"]
    assert live_queue["load_percent"] == {"type": "number", "minimum": 0}
    job_item = {"$ref": "#/components/schemas/WorkerItem"}
    assert live_queue["active_tasks"] == {"type": "array", "items": job_item}
    assert shape_schema("Stats")["properties"]["by_queue"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


def test_every_rest_shape_names_only_fields_of_its_result() -> None:
    for name, (shape, _) in REST_SHAPES.items():
        assert set(REST_FIELDS[name]) <= {f.name for f in facets(shape)}, name


def test_the_openapi_document_carries_every_derived_shape() -> None:
    components = openapi_document(Settings())["components"]["schemas"]
    for name in REST_SHAPES:
        assert components[name] == shape_schema(name), name
