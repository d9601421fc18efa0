"""The store of automatically persisted documents stays within its count and bytes, and the
lookups of trusted documents by id, ``sha256:`` id, hash and text."""

from __future__ import annotations

import hashlib

import pytest

from worker_automation.schema.persisted import (
    DocumentStore,
    PersistedDocuments,
    PersistedQueryError,
    TrustedDocuments,
)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def extensions(text: str) -> dict[str, object]:
    return {"persistedQuery": {"version": 1, "sha256Hash": sha(text)}}


def test_store_keeps_the_most_recent_within_count() -> None:
    store = DocumentStore(keep=3, keep_bytes=10_000)
    for i in range(5):
        store.put(f"h{i}", f"{{ a{i} }}")
    assert len(store) == 3 and store.get("h0") is None and store.get("h1") is None
    assert store.get("h2") == "{ a2 }"  # now the most recent: h3 goes next
    store.put("h5", "{ a5 }")
    assert store.get("h3") is None and store.get("h2") == "{ a2 }"


def test_store_keeps_within_bytes() -> None:
    store = DocumentStore(keep=100, keep_bytes=100)
    store.put("big", "x" * 101)
    assert len(store) == 0
    for i in range(5):
        store.put(f"h{i}", "y" * 30)
    assert store.total_bytes <= 100 and len(store) == 3
    assert store.get("h4") is not None and store.get("h1") is None


def test_registered_text_is_returned_as_the_same_object() -> None:
    documents = PersistedDocuments(None, max_tokens=2000, max_chars=20_000)
    text = "{ __typename }"
    with pytest.raises(PersistedQueryError) as missing:
        documents.resolve(None, extensions(text))
    assert (missing.value.status, missing.value.code) == (200, "PERSISTED_QUERY_NOT_FOUND")
    assert documents.resolve(text, extensions(text)) is text
    assert documents.resolve(None, extensions(text)) is text
    # Not kept: a text that does not parse, or one over the size the schema takes.
    for text in ("{ a", "{ " + "a " * 20_000 + "}"):
        documents.resolve(text, extensions(text))
        assert documents.stored(None, extensions(text), None) is None


def test_trusted_lookups() -> None:
    one, two = "{ __typename }", "query Two { __typename }"
    trusted = TrustedDocuments({"one": one, f"sha256:{sha(two)}": two})
    documents = PersistedDocuments(trusted, max_tokens=2000, max_chars=20_000)
    assert documents.resolve(None, None, "one") == one
    assert documents.resolve(None, None, f"sha256:{sha(one)}") == one
    assert documents.resolve(None, None, f"sha256:{sha(two).upper()}") == two
    assert documents.resolve(None, extensions(two)) == two
    assert documents.resolve(two, None) == two
    for query, ext, document_id in (
        ("{ other }", None, None),
        (None, None, "two"),
        (None, None, None),
        (None, extensions("{ other }"), None),
    ):
        with pytest.raises(PersistedQueryError) as refused:
            documents.resolve(query, ext, document_id)
        assert (refused.value.status, refused.value.code) == (400, "PERSISTED_QUERY_REQUIRED")
    assert len(documents.store) == 0
