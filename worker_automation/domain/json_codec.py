"""JSON written by the API: orjson where it can, the standard library where it cannot.

Responses are compact UTF-8 either way. orjson is several times faster on the large answers
(job lists, live queue state) and refuses only what the standard library can still write:
integers past 64 bits and text holding a lone UTF-16 surrogate, among others; those fall back
instead of failing, a surrogate written as its ``\\uXXXX`` escape (valid JSON, where raw it would
not even be UTF-8): an answer is never lost to a character a caller sent.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from starlette.responses import JSONResponse

_OPTIONS = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON."""
    try:
        return orjson.dumps(value, option=_OPTIONS)
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode()
    except UnicodeEncodeError:
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode()


def dumps_text(value: Any) -> str:
    """``value`` as compact JSON text."""
    return dumps(value).decode()


class FastJSONResponse(JSONResponse):
    """Starlette's JSON response, written by :func:`dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
