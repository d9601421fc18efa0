"""The automation health page in chromium: reached from the automations list, 30 days of finished
jobs per day (days whose jobs were pruned included), and today's row kept live as jobs end.

One embedded ``serve`` for the module. ``WA_CONSOLE_SCREENSHOTS=DIR`` also saves the page there.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_console_browser import (
    AXE,
    AXE_RUN,
    JOB_STEP,
    SHOTS,
    System,
    browser,
    embedded_console,
    open_console,
)

pytestmark = pytest.mark.browser
__all__ = ["browser"]

HEALTH = 'query { automationHealth(automationType: "demo.echo") { day completed failed cancelled } }'


system = embedded_console("console-health")


def _history(workdir: Path) -> int:
    """Finished demo.echo jobs on the 25 days before today (written to the service's database as
    old jobs would be), then pruned: the days keep them. Returns how many."""
    now = datetime.now(UTC)
    rows = []
    for back in range(1, 26):
        end = now - timedelta(days=back)
        for n in range(5 + back % 7):
            status = "FALHA" if n % 6 == 5 else "CANCELADO" if n == 0 and back % 4 == 0 else "CONCLUIDO"
            start = end - timedelta(milliseconds=300 + 150 * n + 40 * back)
            rows.append((status, _text(start), _text(end), _text(end - timedelta(minutes=1))))
    db = sqlite3.connect(workdir / "worker_automation.db", timeout=30)
    try:
        db.executemany(
            "INSERT INTO workers (status, automation_type, queue, priority, retry_count, progress, "
            "data_inicio, data_fim, created_at, updated_at) "
            "VALUES (?, 'demo.echo', 'scan', 0, 0, 100, ?, ?, ?, ?)",
            [(status, start, end, created, end) for status, start, end, created in rows],
        )
        db.commit()
    finally:
        db.close()
    return len(rows)


def _text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _today(page: Any, field: str) -> str:
    return str(page.inner_text(f"table[data-health] tbody tr:first-child [data-field={field}]"))


def test_health_page_from_the_list_with_pruned_days_and_a_live_today(browser: Any, system: System) -> None:
    made = _history(system.workdir)
    pruned = system.graphql("mutation { pruneWorkers(olderThanDays: 0) { deleted } }")
    assert pruned["data"]["pruneWorkers"]["deleted"] >= made, pruned
    kept = system.graphql(HEALTH)["data"]["automationHealth"]
    assert sum(d["completed"] + d["failed"] + d["cancelled"] for d in kept) == made

    page = open_console(browser, system)
    try:
        page.evaluate("() => { window.location.hash = '#/automacoes'; }")
        page.click('tr[data-automation="demo.echo"] th a')
        page.wait_for_selector('main[data-route="automacoes/demo.echo"] table[data-health="demo.echo"]')
        assert len(page.query_selector_all("svg.health-chart g[data-day]")) == 30
        assert len(page.query_selector_all("table[data-health] tbody tr")) == 30
        assert _today(page, "completed") == "0"
        page.wait_for_timeout(1000)  # the page's subscription is listening
        for _ in range(2):
            system.dispatch("demo.echo", {"n": 1})
        page.wait_for_function(
            "() => document.querySelector('table[data-health] tbody tr:first-child [data-field=completed]')"
            "?.textContent === '2'",
            timeout=JOB_STEP * 1000,
        )
        assert _today(page, "rate") == "100.0%"
        page.add_script_tag(path=str(AXE))
        assert page.evaluate(AXE_RUN) == []
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SHOTS) / "saude-automacao.png"), full_page=True)
        assert page.errors == []
    finally:
        page.context.close()
