"""The Processos page and the waiting reason in chromium, against an embedded ``serve``: its pool
workers are listed ONLINE with the queue each consumes, and a job queued on a paused queue says
so on its page, with its place in the queue, and runs once the queue is resumed. A key revoked
while a page that only listens is open sends the operator back to sign in.

One embedded ``serve`` for the module. ``WA_CONSOLE_SCREENSHOTS=DIR`` also saves the pages there.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.harness import run_cli
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


def test_a_key_revoked_while_a_live_page_is_open_goes_back_to_sign_in(browser: Any, system: System) -> None:
    system.keys["revogada"] = run_cli(
        [
            "keys",
            "create",
            "--perfil",
            "funcionario",
            "--scopes",
            "worker_automation:read",
            "--name",
            "revogada",
        ],
        system.env,
        system.workdir,
    )
    page = open_console(browser, system, key="revogada")
    try:
        page.click('nav a[href="#/processos"]')
        page.wait_for_selector('tr[data-status="ONLINE"]', timeout=JOB_STEP * 1000)
        newest = run_cli(["keys", "list"], system.env, system.workdir)  # the last line: the newest key
        assert " revogada " in f" {newest} ", newest
        key_id = newest.split()[0]
        run_cli(["keys", "revoke", key_id], system.env, system.workdir)
        # The page only listens (no request of its own): the socket's close says it.
        page.wait_for_selector("#api-key", timeout=JOB_STEP * 1000)
        assert "revogada" in page.inner_text('[role="alert"]')
        assert page.evaluate("() => Object.keys(sessionStorage).length") == 0
        assert page.errors == []
    finally:
        page.context.close()
