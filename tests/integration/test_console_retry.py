"""A job's page in chromium shows when its automatic retry may run, counting down.

One embedded ``serve`` for the module (demo.fail retries there, after up to an hour).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_console_browser import JOB_STEP, System, browser, embedded_console, open_console

pytestmark = pytest.mark.browser
__all__ = ["browser"]

POLICY = (
    'mutation { updateAutomationSettings(key: "demo.fail", maxAttempts: 2, retryBackoffSeconds: 3600, '
    "retryBackoffMaxSeconds: 3600) { maxAttempts } }"
)
COUNTDOWN = '[data-field="Próxima tentativa"] [data-countdown]'


system = embedded_console("console-retry")


def test_a_retry_waiting_its_backoff_shows_a_countdown(browser: Any, system: System) -> None:
    system.graphql(POLICY)
    job = system.dispatch("demo.fail", {"message": "Portal fora do ar"})
    page = open_console(browser, system)
    page.evaluate("(hash) => { window.location.hash = hash; }", f"#/trabalhos/{job}")
    page.wait_for_selector('.job-head [data-status="AGENDADO"]', timeout=JOB_STEP * 1000)
    page.wait_for_selector(COUNTDOWN, timeout=JOB_STEP * 1000)
    first = page.inner_text(COUNTDOWN)
    assert first.startswith("(em ") and first.endswith(" s)")
    # The countdown moves on by itself.
    page.wait_for_function(
        "([sel, was]) => document.querySelector(sel)?.textContent !== was",
        arg=[COUNTDOWN, first],
        timeout=5000,
    )
    assert system.status(job) == {"status": "AGENDADO", "retryCount": 1}
