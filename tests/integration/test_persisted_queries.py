"""Persisted documents on ``/graphql`` over PostgreSQL and Redis: Apollo's automatic persisted
queries (miss, registration, hit, a hash that does not match, callers without a key) over POST and
GET, and trusted documents (allowed by id and by hash, anything else refused, bad manifests
stopping the start)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.rest_support import Api, running_api
from tests.support.settings import MakeSettings
from worker_automation.asgi.app import create_app
from worker_automation.domain.errors import BadInput
from worker_automation.domain.sharing import PARSED_DOCUMENTS
from worker_automation.schema import build_schema

pytestmark = pytest.mark.services

STATS = "query PersistedStats { stats { total } }"
WORKERS = "query PersistedWorkers($page: Int!) { workers(page: $page, perPage: 5) { total } }"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def persisted(text: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha(text)}}


def not_found(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.json() == {
        "errors": [{"message": "PersistedQueryNotFound", "extensions": {"code": "PERSISTED_QUERY_NOT_FOUND"}}]
    }


def error_code(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    return str(response.json()["errors"][0]["extensions"]["code"])


async def post(api: Api, body: dict[str, Any], kind: str | None = "admin") -> httpx.Response:
    return await api.call("POST", "/graphql", kind=kind, json=body)


async def get(api: Api, params: dict[str, Any], kind: str | None = "admin") -> httpx.Response:
    encoded = {k: json.dumps(v) if isinstance(v, dict) else v for k, v in params.items()}
    return await api.call(
        "GET", "/graphql", kind=kind, params=encoded, headers={"Accept": "application/json"}
    )


TRUSTED = {"stats": STATS, f"sha256:{sha(WORKERS)}": WORKERS}
trusted = pytest.mark.parametrize("api", [TRUSTED], indirect=True)


def manifest(tmp_path: Path, documents: dict[str, str]) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(documents), encoding="utf-8")
    return path


@pytest.fixture
async def api(
    request: pytest.FixtureRequest,
    pg_database_url: str,
    redis_url: str,
    make_settings: MakeSettings,
    tmp_path: Path,
) -> AsyncIterator[Api]:
    """The running service; with trusted documents (``TRUSTED``) when the test asks for them."""
    documents: dict[str, str] | None = getattr(request, "param", None)
    extra = {} if documents is None else {"graphql_trusted_documents": manifest(tmp_path, documents)}
    async with running_api(make_settings(pg_database_url, redis_url, **extra)) as running:
        yield running


async def test_apq_over_post_misses_registers_and_hits(api: Api) -> None:
    extensions = persisted(WORKERS)
    variables = {"page": 1}
    not_found(await post(api, {"extensions": extensions, "variables": variables}))
    registered = await post(api, {"query": WORKERS, "extensions": extensions, "variables": variables})
    assert registered.status_code == 200 and registered.json()["data"]["workers"]["total"] == 0
    hit = await post(api, {"extensions": extensions, "variables": {"page": 2}})
    assert hit.status_code == 200 and hit.json() == {"data": {"workers": {"total": 0}}}
    # The hash may come in upper case too (it is hexadecimal).
    upper = {"persistedQuery": {"version": 1, "sha256Hash": sha(WORKERS).upper()}}
    assert (await post(api, {"extensions": upper, "variables": variables})).json()["data"]


async def test_apq_hit_reuses_the_parse_of_the_registered_text(api: Api) -> None:
    await post(api, {"query": STATS, "extensions": persisted(STATS)})
    parsed = PARSED_DOCUMENTS.peek((STATS, api.services.settings.max_query_tokens))
    assert parsed is not None
    answer = await post(api, {"extensions": persisted(STATS)})
    assert answer.json()["data"]["stats"]["total"] == 0
    assert PARSED_DOCUMENTS.peek((STATS, api.services.settings.max_query_tokens)) is parsed


async def test_apq_over_get(api: Api) -> None:
    extensions = persisted(STATS)
    not_found(await get(api, {"extensions": extensions}))
    registered = await get(api, {"query": STATS, "extensions": extensions})
    assert registered.status_code == 200 and registered.json()["data"]["stats"]["total"] == 0
    hit = await get(api, {"extensions": extensions})
    assert hit.status_code == 200 and hit.json() == {"data": {"stats": {"total": 0}}}
    # A browser asking for HTML with a hash gets the answer, not GraphiQL's page.
    html = await api.call(
        "GET", "/graphql", params={"extensions": json.dumps(extensions)}, headers={"Accept": "text/html"}
    )
    assert html.json() == {"data": {"stats": {"total": 0}}}


async def test_apq_hash_that_does_not_match_the_query_is_400(api: Api) -> None:
    wrong = persisted(WORKERS)
    response = await post(api, {"query": STATS, "extensions": wrong})
    assert error_code(response, 400) == "BAD_USER_INPUT"
    assert response.json()["errors"][0]["message"] == "provided sha does not match query"
    got = await get(api, {"query": STATS, "extensions": wrong})
    assert error_code(got, 400) == "BAD_USER_INPUT"
    # Nothing was kept under that hash.
    not_found(await post(api, {"extensions": wrong, "variables": {"page": 1}}))


async def test_apq_bad_version_or_hash_is_400(api: Api) -> None:
    v2 = {"persistedQuery": {"version": 2, "sha256Hash": sha(STATS)}}
    assert error_code(await post(api, {"extensions": v2}), 400) == "PERSISTED_QUERY_NOT_SUPPORTED"
    short = {"persistedQuery": {"version": 1, "sha256Hash": "abc"}}
    assert error_code(await post(api, {"extensions": short}), 400) == "BAD_USER_INPUT"


async def test_apq_needs_a_key_to_register_or_run(api: Api) -> None:
    document = "query OnlyWithAKey { stats { failed } }"
    extensions = persisted(document)
    for kind in (None, "revoked"):
        assert error_code(await post(api, {"query": document, "extensions": extensions}, kind), 401) == (
            "UNAUTHENTICATED"
        )
        assert error_code(await get(api, {"query": document, "extensions": extensions}, kind), 401) == (
            "UNAUTHENTICATED"
        )
        assert error_code(await get(api, {"extensions": extensions}, kind), 401) == "UNAUTHENTICATED"
    # Nothing was registered by those callers.
    not_found(await post(api, {"extensions": extensions}))


async def test_apq_document_that_does_not_parse_is_not_kept(api: Api) -> None:
    broken = "query { stats { total }"
    answer = await post(api, {"query": broken, "extensions": persisted(broken)})
    assert answer.json()["errors"][0]["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"
    not_found(await post(api, {"extensions": persisted(broken)}))


@trusted
async def test_trusted_documents_run_by_id_hash_or_text(api: Api) -> None:
    expected = {"data": {"stats": {"total": 0}}}
    assert (await post(api, {"documentId": "stats"})).json() == expected
    assert (await get(api, {"documentId": "stats"})).json() == expected
    assert (await post(api, {"documentId": f"sha256:{sha(STATS)}"})).json() == expected
    assert (await post(api, {"extensions": persisted(STATS)})).json() == expected
    assert (await get(api, {"extensions": persisted(STATS)})).json() == expected
    assert (await post(api, {"query": STATS})).json() == expected
    by_hash_id = await post(api, {"documentId": f"sha256:{sha(WORKERS)}", "variables": {"page": 1}})
    assert by_hash_id.json() == {"data": {"workers": {"total": 0}}}


@trusted
async def test_trusted_documents_refuse_anything_else(api: Api) -> None:
    ad_hoc = "{ stats { total failed } }"
    refused = [
        await post(api, {"query": ad_hoc}),
        await get(api, {"query": ad_hoc}),
        await post(api, {"documentId": "not-there"}),
        await post(api, {"extensions": persisted(ad_hoc)}),
        await post(api, {"query": ad_hoc, "extensions": persisted(ad_hoc)}),
        # GraphiQL's introspection is an ad-hoc document too.
        await post(api, {"query": "{ __schema { queryType { name } } }"}),
    ]
    for response in refused:
        assert error_code(response, 400) == "PERSISTED_QUERY_REQUIRED"
    assert PARSED_DOCUMENTS.peek((ad_hoc, api.services.settings.max_query_tokens)) is None
    # Authentication still comes first.
    assert error_code(await post(api, {"documentId": "stats"}, kind=None), 401) == "UNAUTHENTICATED"


@trusted
async def test_trusted_documents_apply_to_the_schema_itself(api: Api) -> None:
    """Websockets run documents through the schema without the HTTP check: the schema refuses too."""
    built = build_schema(api.services.settings)
    refused = await built.execute("{ stats { total failed } }")
    assert refused.errors and refused.errors[0].extensions == {"code": "PERSISTED_QUERY_REQUIRED"}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ("[]", "JSON object"),
        (json.dumps({"a": 3}), "not a GraphQL text"),
        (json.dumps({"broken": "query { stats { total }"}), "document 'broken' is not valid"),
        (json.dumps({"unknown": "{ nope }"}), "document 'unknown' is not valid"),
        (json.dumps({"deep": "{ __typename " + "@skip(if: false)" * 5000 + "}"}), "'deep' is not valid"),
    ],
)
def test_bad_manifest_stops_the_start(
    tmp_path: Path, make_settings: MakeSettings, content: str | None, says: str
) -> None:
    path = tmp_path / "manifest.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    settings = make_settings("sqlite+aiosqlite:///:memory:", None, graphql_trusted_documents=path)
    with pytest.raises(BadInput) as raised:
        create_app(settings)
    assert says in raised.value.message and "WA_GRAPHQL_TRUSTED_DOCUMENTS" in raised.value.message
