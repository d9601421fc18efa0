"""The console in chromium sends its reads as automatic persisted queries: the hash alone, the
document only when the service asks for it, and never twice for the same document."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.test_console_browser import System, embedded_console, go, open_console
from tests.integration.test_console_browser import browser as chromium  # noqa: F401

pytestmark = pytest.mark.browser


system = embedded_console("console-apq")


def test_the_console_sends_hashes_and_each_document_once(
    request: pytest.FixtureRequest, system: System
) -> None:
    sent: list[dict[str, Any]] = []
    answers: list[tuple[dict[str, Any], int, dict[str, Any]]] = []

    def seen(response: Any) -> None:
        request = response.request
        if request.method == "POST" and request.url.endswith("/graphql"):
            body = json.loads(request.post_data or "{}")
            sent.append(body)
            answers.append((body, response.status, response.json()))

    page = open_console(request.getfixturevalue("chromium"), system)
    page.on("response", seen)
    for path in ("trabalhos", "filas", "maquinas", "trabalhos", "filas", "maquinas"):
        go(page, path)
    page.wait_for_load_state("networkidle")
    page.remove_listener("response", seen)
    assert page.errors == []
    assert sent, "the console read nothing"
    hashed = [body for body in sent if "persistedQuery" in body.get("extensions", {})]
    assert hashed == sent, [body for body in sent if body not in hashed]
    with_document = [body for body in sent if "query" in body]
    hashes_sent_with_document = [body["extensions"]["persistedQuery"]["sha256Hash"] for body in with_document]
    # Each document went at most once (the first miss), and every later read was the hash alone.
    assert len(hashes_sent_with_document) == len(set(hashes_sent_with_document))
    assert len(with_document) < len(sent)
    for body, status, answer in answers:
        if "query" not in body:
            assert status == 200 and (
                "data" in answer or answer["errors"][0]["extensions"]["code"] == ("PERSISTED_QUERY_NOT_FOUND")
            ), answer
    page.context.close()
