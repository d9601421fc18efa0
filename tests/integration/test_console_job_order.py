"""The jobs list (Trabalhos) in chromium: a created-from/to range in the filter form, columns sorted
by a click on their header (created, finished, duration, priority), both kept in the address like
the other filters, and live updates still shown while the list is sorted.

One embedded ``serve`` for the module. ``WA_CONSOLE_SCREENSHOTS=DIR`` also saves the page there.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

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

T0 = datetime(2026, 3, 2, 15, 0, tzinfo=UTC)
ROWS = 12


system = embedded_console("console-job-order")


def _text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _history(workdir: Path) -> None:
    """Jobs an hour apart whose durations and priorities follow neither their ids nor their
    creation; every fourth was cancelled before it ran (no end, no duration)."""
    rows = []
    for n in range(ROWS):
        created = T0 + timedelta(hours=(n * 5) % ROWS)
        ended = n % 4 != 3
        start = created + timedelta(seconds=2)
        end = start + timedelta(seconds=(n * 7) % 11 + 1)
        rows.append(
            (
                "CONCLUIDO" if ended else "CANCELADO",
                n % 5,
                _text(start) if ended else None,
                _text(end) if ended else None,
                _text(created),
            )
        )
    db = sqlite3.connect(workdir / "worker_automation.db", timeout=30)
    try:
        db.executemany(
            "INSERT INTO workers (status, automation_type, queue, priority, retry_count, progress, "
            "data_inicio, data_fim, created_at, updated_at) "
            "VALUES (?, 'demo.echo', 'scan', ?, 0, 0, ?, ?, ?, ?)",
            [(*row, row[-1]) for row in rows],
        )
        db.commit()
    finally:
        db.close()


def _api_ids(system: System, arguments: str) -> list[int]:
    answer = system.graphql(f"query {{ workers({arguments}, perPage: 100) {{ items {{ id }} }} }}")
    return [int(item["id"]) for item in answer["data"]["workers"]["items"]]


def _shown(page: Any) -> list[int]:
    return [
        int(i)
        for i in page.eval_on_selector_all("table.jobs tbody tr", "rows => rows.map(r => r.dataset.id)")
    ]


def _wait_shown(page: Any, ids: list[int]) -> None:
    page.wait_for_function(
        "ids => JSON.stringify([...document.querySelectorAll('table.jobs tbody tr')]"
        ".map(r => Number(r.dataset.id))) === JSON.stringify(ids)",
        arg=ids,
    )


def test_sorted_columns_and_a_created_range_in_the_address_and_live(browser: Any, system: System) -> None:
    _history(system.workdir)
    page = open_console(browser, system)
    try:
        page.evaluate("() => { window.location.hash = '#/trabalhos'; }")
        page.wait_for_selector("table.jobs tbody tr")
        for name, field in (("duration", "DURATION"), ("finished", "FINISHED_AT"), ("priority", "PRIORITY")):
            page.click(f'button[data-sort="{name}"]')
            _wait_shown(page, _api_ids(system, f"orderBy: {{field: {field}, direction: DESC}}"))
            assert f"orderBy={name}:desc" in unquote(page.url)
            assert page.get_attribute(f'th:has(button[data-sort="{name}"])', "aria-sort") == "descending"
            page.click(f'button[data-sort="{name}"]')
            _wait_shown(page, _api_ids(system, f"orderBy: {{field: {field}, direction: ASC}}"))
            assert f"orderBy={name}:asc" in unquote(page.url)
        # Unfinished jobs come last when sorted by duration, either way.
        page.click('button[data-sort="duration"]')
        _wait_shown(page, _api_ids(system, "orderBy: {field: DURATION, direction: DESC}"))
        tail = page.eval_on_selector_all(
            "table.jobs tbody tr", "rows => rows.slice(-3).map(r => r.dataset.status)"
        )
        assert tail == ["CANCELADO"] * 3

        # A created range, in the service's zone (America/Sao_Paulo: UTC-3), with the order kept.
        page.fill('input[name="createdFrom"]', "2026-03-02T14:00")
        page.fill('input[name="createdTo"]', "2026-03-02T18:00")
        page.click('form.filters button[type="submit"]')
        ranged = _api_ids(
            system,
            'filter: {createdFrom: "2026-03-02T14:00:00-03:00", createdTo: "2026-03-02T18:00:00-03:00"}, '
            "orderBy: {field: DURATION, direction: DESC}",
        )
        assert 0 < len(ranged) < ROWS
        _wait_shown(page, ranged)
        address = unquote(page.url)
        assert "createdFrom=2026-03-02T14:00" in address and "orderBy=duration:desc" in address
        # A job created now is outside the range: live, it is neither listed nor announced.
        page.wait_for_function("() => document.querySelector('[data-live=\"1\"]') !== null")
        outside = system.dispatch("demo.echo", {"n": 0})
        system.wait_status(outside, "CONCLUIDO")
        page.wait_for_timeout(1000)  # its events reached the page long before it ended; a margin
        assert page.locator("text=/trabalho\\(s\\) novo\\(s\\)/").count() == 0
        assert _shown(page) == ranged

        # The address alone gives the same list: away to another page and back by the address.
        saved = page.evaluate("() => window.location.hash")
        page.evaluate("() => { window.location.hash = '#/filas'; }")
        page.wait_for_selector('main[data-route="filas"]')
        page.evaluate("hash => { window.location.hash = hash; }", saved)
        page.wait_for_selector("table.jobs tbody tr")
        _wait_shown(page, ranged)
        assert page.input_value('input[name="createdTo"]') == "2026-03-02T18:00"

        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(SHOTS) / "trabalhos-ordenados.png"), full_page=True)
        page.add_script_tag(path=str(AXE))
        assert page.evaluate(AXE_RUN) == []

        # Live while sorted: a new job is announced, and is in the list once it is read again.
        page.click("text=Limpar filtros")
        page.click('button[data-sort="created"]')
        page.wait_for_function("() => document.querySelector('[data-live=\"1\"]') !== null")
        job_id = system.dispatch("demo.echo", {"n": 1})
        page.click("text=/trabalho\\(s\\) novo\\(s\\)/", timeout=JOB_STEP * 1000)
        page.wait_for_selector(f'table.jobs tbody tr[data-id="{job_id}"]')
        assert _shown(page)[0] == job_id
        assert page.errors == []
    except Exception:
        # What the operator saw when it failed, for the report.
        print(f"\n===== console at {page.url} =====\n{page.inner_text('body')[:3000]}\n{page.errors}")
        raise
    finally:
        page.context.close()
