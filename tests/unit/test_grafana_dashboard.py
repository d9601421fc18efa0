"""deploy/grafana-dashboard.json queries only metric families the service exports, and shows
every family the design names."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

from worker_automation.asgi.metrics_export import ScrapeValues

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
NAMED = {
    "wa_job_transitions",
    "wa_job_duration_seconds",
    "wa_claims_refused",
    "wa_queue_length",
    "wa_subscribers",
    "wa_http_request_duration_seconds",
    "wa_jobs_recovered",
}
SUFFIXES = ("_bucket", "_count", "_sum", "_total")


def family(sample: str) -> str:
    for suffix in SUFFIXES:
        if sample.endswith(suffix):
            return sample[: -len(suffix)]
    return sample


def test_dashboard_uses_exported_families_only() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {family(name) for expr in exprs for name in re.findall(r"\b((?:wa|process)_[a-z_]+)", expr)}
    scraped = ScrapeValues()
    scraped.rows = {}
    exported = {m.name for m in REGISTRY.collect()} | {m.name for m in scraped.collect()}
    assert used - exported == set()
    assert used >= NAMED
    # The data source is chosen at import, not tied to one Grafana's.
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
