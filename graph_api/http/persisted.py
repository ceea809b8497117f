"""Persisted documents: a document asked for by its id instead of its text.

Three forms, on POST and GET alike (and in a graphql-transport-ws `subscribe` payload):

- GraphQL over HTTP's persisted documents (its Appendix A): `documentId` is
  `sha256:<hex>`, the SHA-256 of the document's text in lower-case hex; the bare hex, the
  `id` of Apollo's persisted-query manifest, names the same document.
- Apollo's automatic persisted queries (APQ): `extensions.persistedQuery` is
  `{"version": 1, "sha256Hash": HEX}`. Without the text, a document this server does not
  hold answers `PersistedQueryNotFound` (code PERSISTED_QUERY_NOT_FOUND), on which Apollo's
  link sends the text with the hash, which must be its SHA-256 (else BAD_REQUEST). The
  text is registered only once it ran for that caller: parsed, validated and allowed (an
  anonymous caller registers nothing where reads need a token), in a store bounded by
  the memory its entries take (`Store`).
- A manifest (GRAPH_API_DOCUMENTS_MANIFEST, in Apollo's persisted-query manifest format,
  written by `graph-api persist`): its documents run by id.

With GRAPH_API_DOCUMENTS=trusted only the manifest's documents run: a text not in it is
refused with FORBIDDEN_DOCUMENT, an unknown id with PERSISTED_QUERY_NOT_FOUND, and nothing
is registered. `Documents.resolve` is the first gate of a request: it hashes a text but
never parses it, and it runs before anything reads DynamoDB; `Documents.ran` registers
what a request sent for registration, once the operation got past every gate.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from graph_api.errors import BadRequest, ForbiddenDocument, PersistedQueryNotFound
from graph_api.settings import Settings, SettingsError

MANIFEST_FORMAT = "apollo-persisted-query-manifest"
SHA256 = "sha256:"
# What registered APQ documents may take in all: the memory of their entries (`entry_bytes`);
# past it the least recently used are dropped (a client whose document was dropped registers
# it again).
STORE_BYTES = 10_000_000
# What an entry costs beyond its two strings: the OrderedDict's slot, index and list node as
# tracemalloc counts them (tests/http/test_persisted.py holds the store to its cap that way),
# doubled for the slots that deletions leave until the table is rebuilt.
ENTRY_OVERHEAD = 184
_HEX = re.compile(r"[0-9a-f]{64}")
_ID_FORM = "documentId must be sha256:<64 lower-case hex digits> (or those digits alone)"


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def entry_bytes(digest: str, text: str) -> int:
    """The memory a registered document takes: its key and text as Python holds them (a
    9-byte text is a 58-byte string), and the entry's share of the store's table."""
    return sys.getsizeof(digest) + sys.getsizeof(text) + ENTRY_OVERHEAD


class Store:
    """Registered documents by their SHA-256, the least recently used dropped first once
    their entries take more than `limit` bytes of memory (`entry_bytes`)."""

    def __init__(self, limit: int = STORE_BYTES) -> None:
        self.limit = limit
        self.size = 0
        self._texts: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._texts)

    def get(self, digest: str) -> str | None:
        text = self._texts.get(digest)
        if text is not None:
            self._texts.move_to_end(digest)
        return text

    def put(self, digest: str, text: str) -> None:
        size = entry_bytes(digest, text)
        if digest in self._texts or size > self.limit:
            return
        self._texts[digest] = text
        self.size += size
        while self.size > self.limit:
            dropped_digest, dropped = self._texts.popitem(last=False)
            self.size -= entry_bytes(dropped_digest, dropped)


@dataclass(frozen=True)
class Resolved:
    """The text a request runs, and the SHA-256 under which to register it once it ran (an
    APQ registration: a text sent with its hash), or None."""

    text: str
    register: str | None = None


def load_manifest(path: str) -> dict[str, str]:
    """The documents of a persisted-query manifest by id; a file that is not one (or an
    `id` that is not its body's SHA-256) is a SettingsError naming what is wrong."""
    where = f"GRAPH_API_DOCUMENTS_MANIFEST ({path})"
    try:
        manifest = orjson.loads(Path(path).read_bytes())
    except OSError as error:
        raise SettingsError(f"{where} cannot be read: {error.strerror or error}") from None
    except orjson.JSONDecodeError as error:
        raise SettingsError(f"{where} is not JSON: {error}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != MANIFEST_FORMAT
        or manifest.get("version") != 1
        or not isinstance(manifest.get("operations"), list)
    ):
        raise SettingsError(
            f'{where} is not a manifest: {{"format": "{MANIFEST_FORMAT}", "version": 1,'
            ' "operations": [...]}'
        )
    documents: dict[str, str] = {}
    for n, operation in enumerate(manifest["operations"]):
        body = operation.get("body") if isinstance(operation, dict) else None
        if not isinstance(body, str) or operation.get("id") != sha256_hex(body):
            raise SettingsError(f"{where}: operation {n} needs a body and its SHA-256 as id")
        documents[operation["id"]] = body
    return documents


class Documents:
    """Which document a request runs, from its text, `documentId` and `extensions`."""

    def __init__(self, manifest: Mapping[str, str], trusted: bool, store: Store) -> None:
        self.manifest = manifest
        self.trusted = trusted
        self.store = store

    @classmethod
    def from_settings(cls, settings: Settings) -> Documents:
        path = settings.documents_manifest
        return cls(load_manifest(path) if path else {}, settings.documents == "trusted", Store())

    def resolve(self, query: object, document_id: object, extensions: object) -> Resolved | None:
        """The text to run (None when there is neither a text nor an id: Strawberry's 400).
        Raises BadRequest (a malformed id or hash, a hash not the text's),
        PersistedQueryNotFound or ForbiddenDocument; never parses the text, and registers
        nothing: `ran` does, once the text ran."""
        digest = _digest(document_id, extensions)
        if isinstance(query, str):
            if digest is None and not self.trusted:
                return Resolved(query)  # the common case: no hashing
            actual = sha256_hex(query)
            if digest is not None and digest != actual:
                raise BadRequest("provided sha does not match query")
            if self.trusted:
                if actual not in self.manifest:
                    raise ForbiddenDocument(
                        "this server runs only its trusted documents (GRAPH_API_DOCUMENTS="
                        "trusted): send the documentId of one in its manifest"
                    )
                return Resolved(query)
            return Resolved(query, None if actual in self.manifest else actual)
        if digest is None:
            return None
        text = self.manifest.get(digest)
        if text is None and not self.trusted:
            text = self.store.get(digest)
        if text is None:
            raise PersistedQueryNotFound("PersistedQueryNotFound")
        return Resolved(text)

    def ran(self, resolved: Resolved) -> None:
        """The operation `resolved` names got past every gate (it parsed, validated, and its
        caller may run it): register its text if it was sent for that."""
        if resolved.register is not None:
            self.store.put(resolved.register, resolved.text)


def _digest(document_id: object, extensions: object) -> str | None:
    """The SHA-256 (hex) a request names, by `documentId` or APQ's extension, if any."""
    digest = None
    if document_id is not None:
        if not isinstance(document_id, str):
            raise BadRequest(_ID_FORM)
        digest = document_id.removeprefix(SHA256)
        if not _HEX.fullmatch(digest):
            raise BadRequest(_ID_FORM)
    persisted = extensions.get("persistedQuery") if isinstance(extensions, dict) else None
    if persisted is None:
        return digest
    hashed = persisted.get("sha256Hash") if isinstance(persisted, dict) else None
    if (
        not isinstance(persisted, dict)
        or persisted.get("version") != 1
        or not isinstance(hashed, str)
        or not _HEX.fullmatch(hashed)
    ):
        raise BadRequest(
            'extensions.persistedQuery must be {"version": 1, "sha256Hash": <64 lower-case'
            " hex digits>}"
        )
    if digest is not None and digest != hashed:
        raise BadRequest("documentId and extensions.persistedQuery name different documents")
    return hashed


def cache_control(success: bool, authorized: bool, max_age: int) -> str:
    """`Cache-Control` for a query asked by id over GET: a CDN may keep only an anonymous
    answer with data and no error (an error, a miss above all, must not stick: Apollo's
    link would never get to register the text)."""
    if success and not authorized and max_age > 0:
        return f"public, max-age={max_age}"
    return "private, no-store" if authorized else "no-store"


def read_id(params: Mapping[str, Any]) -> object:
    """The `documentId` of a request's parameters (an empty one is none)."""
    value = params.get("documentId")
    return None if value == "" else value
