"""The console in chromium sends its reads as automatic persisted queries: the hash alone, the
document only when the service asks for it, and never twice for the same document."""

from __future__ import annotations

import hashlib
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


def test_two_reads_of_a_new_document_at_once_send_it_once(
    request: pytest.FixtureRequest, system: System
) -> None:
    """Both reads miss at the same moment; only one of them sends the document, the other waits."""
    sent: list[dict[str, Any]] = []

    def seen(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/graphql"):
            sent.append(json.loads(request.post_data or "{}"))

    page = open_console(request.getfixturevalue("chromium"), system)
    page.on("request", seen)
    document = "query ReadTwiceAtOnce { __typename }"
    answers = page.evaluate(
        """async (document) => {
            const api = await import(new URL("js/api.js", window.location.href.replace(/#.*$/, "")).href);
            const twice = await Promise.all([api.gql(document), api.gql(document)]);
            return [...twice, await api.gql(document)];
        }""",
        document,
    )
    page.remove_listener("request", seen)
    assert answers == [{"__typename": "Query"}] * 3
    digest = hashlib.sha256(document.encode()).hexdigest()
    mine = [
        body
        for body in sent
        if body.get("extensions", {}).get("persistedQuery", {}).get("sha256Hash") == digest
    ]
    assert [body.get("query") for body in mine].count(document) == 1, mine
    # The reads at once: two hashes alone, one document, and the waiting read's hash alone again;
    # then the read after them sent the hash alone.
    assert len(mine) <= 5 and "query" not in mine[-1], mine
    assert page.errors == []
    page.context.close()
