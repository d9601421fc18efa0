"""throughput, durations and auditLog computed from the rows, on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import insert

from tests.integration.operator_support import any_services
from tests.unit.graphql_support import make_api
from worker_automation.models import Job, utcnow
from worker_automation.resolvers.history import percentile
from worker_automation.resolvers.services import Services

__all__ = ["any_services"]


def _row(status: str, ended_minutes_ago: float, run_ms: int, **extra: Any) -> dict[str, Any]:
    end = utcnow() - timedelta(minutes=ended_minutes_ago)
    return {
        "automation_type": "demo.echo",
        "queue": "scan",
        "status": status,
        "priority": 0,
        "retry_count": 0,
        "progress": 0,
        "data_inicio": end - timedelta(milliseconds=run_ms),
        "data_fim": end,
        "created_at": end - timedelta(hours=1),
        "updated_at": end,
        **extra,
    }


async def test_throughput_and_durations(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    runs = [100 * (i + 1) for i in range(40)]  # 100 ms .. 4000 ms
    rows = [_row("CONCLUIDO", 5, ms) for ms in runs[:30]]
    rows += [_row("FALHA", 5, ms) for ms in runs[30:]]
    rows += [_row("CANCELADO", 5, 1)] * 2
    rows += [_row("CONCLUIDO", 130, 50)] * 3  # two hours before
    rows += [_row("CONCLUIDO", 5, 999_999, automation_type="demo.sleep", queue="certidao")]
    rows += [_row("CONCLUIDO", 60 * 30, 10)]  # a month ago: outside every range asked
    async with services.db.session() as session:
        await session.execute(insert(Job), rows)

    since = (utcnow() - timedelta(hours=3)).isoformat()
    query = (
        "query($since: DateTime, $q: String, $a: String) { throughput(since: $since, bucketMinutes: 60, "
        "queue: $q, automationType: $a) { bucketStart completed failed cancelled } }"
    )
    buckets = (await api.ok(query, {"since": since}))["throughput"]
    assert 3 <= len(buckets) <= 5
    assert sum(b["completed"] for b in buckets) == 34
    last = (buckets[-1]["completed"], buckets[-1]["failed"], buckets[-1]["cancelled"])
    assert last in {(31, 10, 2), (0, 0, 0)}  # (0, 0, 0): the hour turned in the last 5 minutes
    assert sum(b["failed"] for b in buckets) == 10 and sum(b["cancelled"] for b in buckets) == 2
    assert all(b["bucketStart"].endswith("-03:00") and b["bucketStart"][14:19] == "00:00" for b in buckets)
    scan_only = (await api.ok(query, {"since": since, "q": "scan", "a": "demo.echo"}))["throughput"]
    assert sum(b["completed"] for b in scan_only) == 33

    durations = "query($a: String) { durations(automationType: $a) { count p50Ms p95Ms p99Ms maxMs } }"
    found = (await api.ok(durations, {"a": "demo.echo"}))["durations"]
    ordered = sorted(float(ms) for ms in [*runs, 50, 50, 50])
    assert found["count"] == 43
    for name, fraction in (("p50Ms", 0.5), ("p95Ms", 0.95), ("p99Ms", 0.99)):
        assert abs(found[name] - percentile(ordered, fraction)) < 1.0, name
    assert abs(found["maxMs"] - 4000) < 1.0
    empty = (await api.ok(durations, {"a": "cnd_federal"}))["durations"]
    assert empty == {"count": 0, "p50Ms": None, "p95Ms": None, "p99Ms": None, "maxMs": None}

    for query, name in (
        ("{ throughput(bucketMinutes: 0) { completed } }", "bucket_minutes"),
        ('{ throughput(since: "2020-01-01T00:00:00+00:00", bucketMinutes: 1) { completed } }', "since"),
        ('{ durations(automationType: "nope") { count } }', "automation_type"),
    ):
        error = await api.fails(query)
        assert error.extensions == {"code": "BAD_USER_INPUT", "field": name} and name in error.message


async def test_audit_log_filters(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    before = utcnow().isoformat()
    await api.ok('mutation { pauseQueue(queue: "scan") { paused } }')
    await api.ok('mutation { resumeQueue(queue: "scan") { paused } }')
    await api.dispatch("demo.echo", priority=1)
    query = (
        "query($f: AuditFilter, $p: Int, $n: Int) { auditLog(filter: $f, page: $p, perPage: $n) "
        "{ total pages items { id at actor action target result detail } } }"
    )
    everything = (await api.ok(query, {}))["auditLog"]
    assert [e["action"] for e in everything["items"][:3]] == ["dispatch", "resume_queue", "pause_queue"]
    paused = (await api.ok(query, {"f": {"action": "pause_queue"}}))["auditLog"]
    assert paused["total"] == 1 and paused["items"][0]["target"] == "queue:scan"
    assert paused["items"][0]["result"] == "ok"
    mine = (await api.ok(query, {"f": {"actor": "ADMIN", "since": before}, "n": 2, "p": 2}))["auditLog"]
    assert mine["total"] == 3 and mine["pages"] == 2 and len(mine["items"]) == 1
    assert (await api.ok(query, {"f": {"actor": "nobody"}}))["auditLog"]["total"] == 0


async def test_audit_log_of_one_target(any_services: Services) -> None:
    services = any_services
    api = await make_api(services)
    mine = await api.dispatch("demo.echo")
    other = await api.dispatch("demo.echo")
    cancel = "mutation($id: Int!) { cancelWorker(id: $id) { status } }"
    await api.ok(cancel, {"id": mine["id"]})
    await api.ok(cancel, {"id": other["id"]})
    await api.ok('mutation { pauseQueue(queue: "scan") { paused } }')
    query = (
        "query($f: AuditFilter, $p: Int, $n: Int) { auditLog(filter: $f, page: $p, perPage: $n) "
        "{ total items { action target } } }"
    )
    target = f"worker:{mine['id']}"
    found = (await api.ok(query, {"f": {"target": target}}))["auditLog"]
    assert found["total"] == 2
    assert found["items"] == [
        {"action": "cancel", "target": target},
        {"action": "dispatch", "target": target},
    ]
    both = (await api.ok(query, {"f": {"target": target, "action": "cancel"}}))["auditLog"]
    assert both["items"] == [{"action": "cancel", "target": target}]
    assert (await api.ok(query, {"f": {"target": "worker:0"}}))["auditLog"]["total"] == 0
    # Paging works on the target's entries alone.
    second = (await api.ok(query, {"f": {"target": target}, "p": 2, "n": 1}))["auditLog"]
    assert second["items"] == [{"action": "dispatch", "target": target}]


async def test_a_jobs_audit_trail_includes_the_bulk_actions_and_batches_that_named_it(
    any_services: Services,
) -> None:
    services = any_services
    api = await make_api(services)
    batch = (
        await api.ok(
            "mutation($i: [DispatchInput!]!) { dispatchAutomations(inputs: $i) { id } }",
            {"i": [{"automationType": "demo.echo", "context": {"n": n}} for n in range(2)]},
        )
    )["dispatchAutomations"]
    first, second = batch[0]["id"], batch[1]["id"]
    cancelled = await api.ok(
        "mutation($f: WorkerFilter!) { cancelWorkers(filter: $f) { changed } }",
        {"f": {"automationType": "demo.echo", "status": "AGENDADO"}},
    )
    assert cancelled["cancelWorkers"]["changed"] >= 2
    await api.ok("mutation($id: Int!) { retryWorker(id: $id) { status } }", {"id": first})
    query = "query($f: AuditFilter) { auditLog(filter: $f) { total items { action target } } }"
    mine = (await api.ok(query, {"f": {"target": f"worker:{first}"}}))["auditLog"]
    assert mine["items"] == [
        {"action": "retry", "target": f"worker:{first}"},
        {"action": "cancel_workers", "target": None},
        {"action": "dispatch", "target": None},
    ]
    theirs = (await api.ok(query, {"f": {"target": f"worker:{second}"}}))["auditLog"]
    assert [item["action"] for item in theirs["items"]] == ["cancel_workers", "dispatch"]
    # Another id, even one whose digits are a prefix or suffix of these, names none of them.
    for other in (first * 10, int(str(first)[:-1] or 0) or 999_999, 2_147_483_647):
        if other not in (first, second):
            found = (await api.ok(query, {"f": {"target": f"worker:{other}"}}))["auditLog"]
            assert found["total"] == 0, other
    assert (await api.ok(query, {"f": {"target": "worker:99999999999"}}))["auditLog"]["total"] == 0


async def test_a_job_ending_on_a_bucket_boundary_counts_in_the_bucket_it_opens(
    any_services: Services,
) -> None:
    services = any_services
    api = await make_api(services)
    now = utcnow()
    boundary = (now - timedelta(minutes=30)).replace(second=0, microsecond=0)
    ends = {
        boundary - timedelta(microseconds=1): "CONCLUIDO",
        boundary: "FALHA",
        boundary + timedelta(seconds=59, microseconds=999_999): "CANCELADO",
    }
    rows = [
        _row(status, 0, 10, data_fim=end, data_inicio=end - timedelta(milliseconds=10))
        for end, status in ends.items()
    ]
    async with services.db.session() as session:
        await session.execute(insert(Job), rows)

    query = (
        "query($since: DateTime) { throughput(since: $since, bucketMinutes: 1) "
        "{ bucketStart completed failed cancelled } }"
    )
    since = (now - timedelta(hours=1)).isoformat()
    buckets = (await api.ok(query, {"since": since}))["throughput"]
    found = {b["bucketStart"]: (b["completed"], b["failed"], b["cancelled"]) for b in buckets}
    nonzero = {start: counts for start, counts in found.items() if counts != (0, 0, 0)}
    assert list(nonzero.values()) == [(1, 0, 0), (0, 1, 1)]
    assert list(nonzero)[1][11:19] == boundary.astimezone(services.settings.tz).strftime("%H:%M:%S")
