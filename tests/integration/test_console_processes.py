"""The Processos page and the waiting reason in chromium, against an embedded ``serve``: its pool
workers are listed ONLINE with the queue each consumes, and a job queued on a paused queue says
so on its page, with its place in the queue, and runs once the queue is resumed.

One embedded ``serve`` for the module. ``WA_CONSOLE_SCREENSHOTS=DIR`` also saves the pages there.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_console_browser import (
    AXE,
    AXE_RUN,
    JOB_STEP,
    System,
    browser,
    embedded_console,
    open_console,
    shot,
)

pytestmark = pytest.mark.browser
__all__ = ["browser"]


system = embedded_console("console-processes")


def test_processes_page_and_a_waiting_job(browser: Any, system: System) -> None:
    page = open_console(browser, system)
    try:
        page.click('nav a[href="#/processos"]')
        page.wait_for_selector('main[data-route="processos"] h1')
        # The embedded serve's pool workers answer inspect: one per queue (embedded-QUEUE-PID@HOST), ONLINE.
        page.wait_for_selector('tr[data-status="ONLINE"][data-process*="scan-"]', timeout=JOB_STEP * 1000)
        row = page.inner_text('tr[data-process*="scan-"]')
        assert "Pool Celery" in row and "scan" in row and "Ativo" in row
        page.add_script_tag(path=str(AXE))
        assert page.evaluate(AXE_RUN) == []
        shot(page, "processos")

        system.graphql('mutation { pauseQueue(queue: "scan") { queue } }')
        first = system.dispatch("demo.echo", {"n": 1})
        second = system.dispatch("demo.echo", {"n": 2})
        page.evaluate("(id) => { window.location.hash = `#/trabalhos/${id}`; }", second)
        page.wait_for_selector('[data-field="waiting"][data-reason="QUEUE_PAUSED"]')
        assert "Fila pausada" in page.inner_text('[data-field="waiting"]')
        assert page.inner_text('[data-field="queue-position"]') == "2º na fila"
        shot(page, "trabalho-aguardando")

        system.graphql('mutation { resumeQueue(queue: "scan") { queue } }')
        for job in (first, second):
            system.wait_status(job, "CONCLUIDO")
        # A job that is no longer queued shows no waiting reason.
        page.wait_for_selector('[data-field="waiting"]', state="detached", timeout=JOB_STEP * 1000)
        assert page.errors == []
    finally:
        page.context.close()
