"""Persisted documents: Apollo's automatic persisted queries and a manifest of trusted documents.

A client that sends the same operation over and over may send its SHA-256 instead of its text
(``extensions.persistedQuery = {"version": 1, "sha256Hash": ...}``). The first time, the service
answers ``PERSISTED_QUERY_NOT_FOUND`` and the client sends both; the service checks the hash
against the text and keeps the text, so later requests carry only the hash. Kept texts are public
(anyone who knows a hash knows the document), so one process-wide store serves every caller; it
is bounded in count and in bytes, least recently used out first. Only callers that passed
authentication reach it: the transport refuses a missing or invalid key before reading a body.
The text found is the same string object every time, so the parse and the validation verdict
kept for it (:mod:`worker_automation.domain.sharing`, :class:`~worker_automation.schema.limits.DocumentCache`)
are found again without parsing or validating.

With ``WA_GRAPHQL_TRUSTED_DOCUMENTS`` set to a JSON manifest ``{id: document}`` (ids as written by
the operator, or ``sha256:<hash>`` as Apollo's and GraphQL Codegen's manifests write them) only
those documents run: by ``documentId``, by ``extensions.persistedQuery.sha256Hash``, or as a
``query`` whose text is one of them. Anything else is refused with ``PERSISTED_QUERY_REQUIRED``,
so a caller, even one holding a valid key, cannot make the service parse a document of its own.
Every manifest document must parse and pass the schema's validation and guards at start-up.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from graphql import GraphQLError, GraphQLSchema, build_schema, parse, specified_rules, validate
from graphql.validation import ASTValidationRule

from worker_automation.domain.errors import BadInput
from worker_automation.domain.sharing import parsed_document

NOT_FOUND_MESSAGE: Final = "PersistedQueryNotFound"
NOT_FOUND_CODE: Final = "PERSISTED_QUERY_NOT_FOUND"
REQUIRED_CODE: Final = "PERSISTED_QUERY_REQUIRED"
REQUIRED_MESSAGE: Final = (
    "Este servico so executa documentos da sua lista de documentos confiaveis: envie documentId "
    "ou extensions.persistedQuery.sha256Hash de um deles."
)
MISMATCH_MESSAGE: Final = "provided sha does not match query"
UNSUPPORTED_CODE: Final = "PERSISTED_QUERY_NOT_SUPPORTED"
SETTING: Final = "WA_GRAPHQL_TRUSTED_DOCUMENTS"
# Enough for every operation of a few frontends; the bytes bound caps memory whatever they send.
KEEP_DOCUMENTS: Final = 1000
KEEP_BYTES: Final = 4 * 1024 * 1024
_HASH: Final = re.compile(r"[0-9a-f]{64}")
_SHA_PREFIX: Final = "sha256:"


class PersistedQueryError(Exception):
    """A request refused because of its persisted document: answered with ``status`` and one
    error of ``code`` (``PERSISTED_QUERY_NOT_FOUND`` is a 200, as Apollo Server answers it)."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class DocumentStore:
    """Texts of automatically persisted documents by SHA-256, bounded in count and bytes."""

    def __init__(self, keep: int = KEEP_DOCUMENTS, keep_bytes: int = KEEP_BYTES) -> None:
        self._keep = keep
        self._keep_bytes = keep_bytes
        self._bytes = 0
        self._texts: OrderedDict[str, str] = OrderedDict()

    def get(self, sha: str) -> str | None:
        text = self._texts.get(sha)
        if text is not None:
            self._texts.move_to_end(sha)
        return text

    def put(self, sha: str, text: str) -> None:
        if sha in self._texts:
            self._texts.move_to_end(sha)
            return
        size = len(text)
        if size > self._keep_bytes:
            return
        self._texts[sha] = text
        self._bytes += size
        while len(self._texts) > self._keep or self._bytes > self._keep_bytes:
            _, dropped = self._texts.popitem(last=False)
            self._bytes -= len(dropped)

    @property
    def total_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._texts)


def _persisted_hash(extensions: Mapping[str, Any] | None) -> str | None:
    """The ``sha256Hash`` of ``extensions.persistedQuery`` (lower case), None without one."""
    if not extensions:
        return None
    persisted = extensions.get("persistedQuery")
    if persisted is None:
        return None
    if not isinstance(persisted, dict) or persisted.get("version", 1) != 1:
        raise PersistedQueryError(400, "PersistedQueryNotSupported: only version 1", UNSUPPORTED_CODE)
    sha = persisted.get("sha256Hash")
    if not isinstance(sha, str) or not _HASH.fullmatch(sha.lower()):
        raise PersistedQueryError(400, "sha256Hash must be 64 hexadecimal digits", "BAD_USER_INPUT")
    return sha.lower()


class TrustedDocuments:
    """The manifest's documents by id, by SHA-256 and by text."""

    def __init__(self, manifest: Mapping[str, str]) -> None:
        self.by_id: dict[str, str] = dict(manifest)
        self.by_hash: dict[str, str] = {sha256_hex(text): text for text in manifest.values()}
        self.texts: frozenset[str] = frozenset(manifest.values())

    def find(self, document_id: str) -> str | None:
        found = self.by_id.get(document_id)
        if found is None and document_id.startswith(_SHA_PREFIX):
            found = self.by_hash.get(document_id[len(_SHA_PREFIX) :].lower())
        return found


def read_manifest(path: Path) -> dict[str, str]:
    """The ``{id: document}`` of the manifest at ``path``; BadInput naming the setting if it is
    unreadable or not such an object."""
    try:
        decoded = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BadInput(SETTING, f"{SETTING}: cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadInput(SETTING, f"{SETTING}: {path} is not JSON: {exc}") from None
    if not isinstance(decoded, dict) or not decoded:
        raise BadInput(SETTING, f"{SETTING}: {path} must hold a JSON object {{id: document}}")
    bad = [key for key, value in decoded.items() if not isinstance(value, str) or not value.strip()]
    if bad:
        raise BadInput(SETTING, f"{SETTING}: the document of {bad[0]!r} is not a GraphQL text")
    return decoded


def load_trusted(
    path: Path, sdl: str, rules: Iterable[type[ASTValidationRule]], max_tokens: int
) -> TrustedDocuments:
    """The manifest at ``path``, every document parsed and validated against the schema ``sdl``
    with ``rules`` (the guards); BadInput naming the first document that fails."""
    manifest = read_manifest(path)
    schema: GraphQLSchema = build_schema(sdl)
    all_rules = [*specified_rules, *rules]
    for key, text in manifest.items():
        try:
            errors = validate(schema, parse(text, max_tokens=max_tokens), all_rules)
        except GraphQLError as exc:
            errors = [exc]
        if errors:
            raise BadInput(SETTING, f"{SETTING}: document {key!r} is not valid: {errors[0].message}")
    return TrustedDocuments(manifest)


class PersistedDocuments:
    """Turns what a request names (text, hash or id) into the text to run, or refuses it."""

    def __init__(
        self,
        trusted: TrustedDocuments | None,
        max_tokens: int,
        max_chars: int,
        store: DocumentStore | None = None,
    ) -> None:
        self.trusted = trusted
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.store = store or DocumentStore()

    def resolve(
        self,
        query: str | None,
        extensions: Mapping[str, Any] | None,
        document_id: str | None = None,
        registrable: bool = True,
    ) -> str | None:
        """The text the request runs (``query`` itself when it names no persisted document).

        ``registrable``: whether a text sent with its hash may be kept (the caller is
        authenticated by then); only a text that parses within the schema's limits is."""
        sha = _persisted_hash(extensions)
        if query is not None and sha is not None and sha256_hex(query) != sha:
            raise PersistedQueryError(400, MISMATCH_MESSAGE, "BAD_USER_INPUT")
        if self.trusted is not None:
            return self._trusted(query, sha, document_id)
        if query is not None:
            if sha is not None and registrable and self._parses(query):
                self.store.put(sha, query)
            return query
        if sha is None:
            return None
        found = self.store.get(sha)
        if found is None:
            raise PersistedQueryError(200, NOT_FOUND_MESSAGE, NOT_FOUND_CODE)
        return found

    def stored(
        self, query: str | None, extensions: Mapping[str, Any] | None, document_id: str | None
    ) -> str | None:
        """The text a request names, without refusing or keeping anything (None when unknown)."""
        try:
            return self.resolve(query, extensions, document_id, registrable=False)
        except PersistedQueryError:
            return None

    def _parses(self, query: str) -> bool:
        return len(query) <= self.max_chars and parsed_document(query, self.max_tokens) is not None

    def _trusted(self, query: str | None, sha: str | None, document_id: str | None) -> str:
        assert self.trusted is not None
        found: str | None = None
        if document_id is not None:
            found = self.trusted.find(document_id)
        elif sha is not None:
            found = self.trusted.by_hash.get(sha)
        elif query is not None and query in self.trusted.texts:
            found = query
        if found is None:
            raise PersistedQueryError(400, REQUIRED_MESSAGE, REQUIRED_CODE)
        return found
