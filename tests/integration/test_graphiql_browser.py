"""GraphiQL at ``/graphql`` in a real headless browser, with no internet: the docs panel, a query
and a subscription typed and run as a person would."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.integration.graphql_ws_support import Served, serve
from tests.support.settings import MakeSettings
from worker_automation.settings import Settings

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
QUERY_EDITOR = ".graphiql-query-editor .CodeMirror"
HEADER_EDITOR = ".graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror"
RESULT = ".result-window"
DOCS_BUTTON = 'button[aria-label$="Documentation Explorer"]'
DOCS = ".graphiql-doc-explorer-content"


def require_browser() -> None:
    """Skip (or fail under WA_REQUIRE_SERVICES=1) without Debian's chromium or Python playwright."""
    missing = []
    if not CHROMIUM.exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        missing.append("the playwright Python package (pip install playwright)")
    if not missing:
        return
    reason = "browser test needs " + " and ".join(missing)
    if os.environ.get("WA_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} and WA_REQUIRE_SERVICES=1", pytrace=False)
    pytest.skip(reason)


async def replace_text(page: Any, selector: str, text: str) -> None:
    await page.click(selector)
    await page.keyboard.press("Control+A")
    await page.keyboard.insert_text(text)
    # GraphiQL reads the editors after a short debounce (the operation name among them).
    await page.wait_for_timeout(400)


async def run_and_read(page: Any, served: Served, query: str, expected: str) -> str:
    await replace_text(page, QUERY_EDITOR, query)
    await page.click(".graphiql-execute-button")
    await page.wait_for_function(
        "([selector, expected]) => (document.querySelector(selector)?.innerText || '').includes(expected)",
        arg=[RESULT, expected],
        timeout=15_000,
    )
    text: str = await page.inner_text(RESULT)
    return text


async def docs_list_query(page: Any) -> None:
    """The schema, fetched again by itself with the key just typed (the page loaded without one and
    got a 401), opens in the docs panel at its root types: the standard introspection query passed."""
    await page.click(DOCS_BUTTON)
    await page.wait_for_function(
        "(selector) => /query:\\s*Query/.test(document.querySelector(selector)?.innerText || '')",
        arg=DOCS,
        timeout=15_000,
    )
    assert await page.locator(".graphiql-doc-explorer-error").count() == 0
    await page.click(DOCS_BUTTON)


async def test_graphiql_runs_a_query_and_a_subscription(
    sqlite_database_url: str, make_settings: MakeSettings, tmp_path: Path
) -> None:
    require_browser()
    from playwright.async_api import async_playwright

    settings: Settings = make_settings(sqlite_database_url, None)
    async with serve(settings) as served, async_playwright() as playwright:
        await served.dispatch()
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = await browser.new_page()
            failures: list[str] = []
            page.on("requestfailed", lambda request: failures.append(request.url))
            page.on("pageerror", lambda error: failures.append(str(error)))
            await page.goto(served.url)
            await page.wait_for_selector(QUERY_EDITOR, timeout=20_000)
            await replace_text(page, HEADER_EDITOR, json.dumps({"X-API-Key": served.keys["reader"]}))
            await docs_list_query(page)

            text = await run_and_read(page, served, "{ stats { total byQueue } }", '"total": 1')
            assert '"scan": 1' in text

            subscription = "subscription { workerEvents { kind worker { automationType } } }"
            await replace_text(page, QUERY_EDITOR, subscription)
            await page.click(".graphiql-execute-button")
            await served.wait_listeners(1)
            await served.dispatch("demo.fail")
            await page.wait_for_function(
                "(selector) => (document.querySelector(selector)?.innerText || '').includes('demo.fail')",
                arg=RESULT,
                timeout=15_000,
            )
            assert '"kind": "CREATED"' in await page.inner_text(RESULT)
            await page.screenshot(path=str(tmp_path / "graphiql.png"))
            assert failures == []
        finally:
            await browser.close()
