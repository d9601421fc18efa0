"""What a caller may send: sizes of bodies, contexts and results, and text a database can store.

The numbers live in :class:`~worker_automation.settings.Settings` (``WA_MAX_BODY_BYTES``,
``WA_MAX_CONTEXT_BYTES``, ``WA_MAX_RESULT_BYTES``, ...); the checks here are shared by every
transport so a bad value is refused the same way, naming its field, before it reaches a statement.
PostgreSQL refuses a NUL character in text and JSON, and no driver can encode a lone UTF-16
surrogate: either would otherwise surface as a database error (a 500) instead of a 4xx.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from worker_automation.domain.errors import BadInput
from worker_automation.domain.json_codec import dumps

# Ids are 32-bit columns (and GraphQL's Int): a number outside would be a database error rather
# than "not found", so every transport refuses it as bad input.
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
# Nesting a stored JSON value may have (the parser's own limit is far above anything real).
MAX_JSON_DEPTH: Final = 64


# What no database stores in text: NUL and lone UTF-16 surrogates.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def readable(text: str) -> str:
    """``text`` with what cannot be stored or sent written as ``\\uXXXX`` escapes: how a refused
    object key is named back to its caller (the raw character would break the answer itself)."""
    return _UNSTORABLE.sub(_escaped, text)


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{readable(key)}" if path else readable(key)


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None when it can."""
    if "\x00" in value:
        return "contem o caractere NUL (\\u0000), que nao pode ser armazenado"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contem um caractere UTF-16 isolado (surrogate), que nao e UTF-8 valido"
    return None


def check_text(value: str, field: str) -> str:
    """``value`` itself, or BadInput naming ``field`` when a database could not store it."""
    problem = text_problem(value)
    if problem is not None:
        raise BadInput(field, f"{field} {problem}")
    return value


def check_storable(value: Any, field: str) -> None:
    """Every string (keys included) and number of a JSON value can be stored; BadInput naming the
    innermost field otherwise (``context.endereco.rua``, ``jobs[2].context``)."""
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, path or "body")
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise BadInput(path or "body", f"{path or 'body'} deve ser um numero finito")
        elif isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise BadInput(path or "body", f"{path or 'body'} tem mais de {MAX_JSON_DEPTH} niveis")
            if isinstance(item, dict):
                for key, child in item.items():
                    inner = _join(path, str(key))
                    if isinstance(key, str):
                        check_text(key, inner)
                    stack.append((child, inner, depth + 1))
            else:
                stack.extend((child, _join(path, i), depth + 1) for i, child in enumerate(item))


def json_size(value: Any) -> int:
    """Bytes ``value`` takes as compact UTF-8 JSON (what is stored and sent back)."""
    return len(dumps(value))


def check_size(value: Any, field: str, limit: int) -> None:
    """BadInput naming ``field`` when ``value`` takes more than ``limit`` bytes as JSON."""
    size = json_size(value)
    if size > limit:
        raise BadInput(field, f"{field} grande demais: {size} bytes (maximo {limit} bytes)", limit=limit)


def check_int32(value: Any, field: str) -> None:
    """BadInput naming ``field`` for an integer its 32-bit column cannot hold."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT32_MIN <= value <= INT32_MAX:
        raise BadInput(field, f"{field} fora do intervalo de um inteiro de 32 bits")


def result_refusal(result: Any, limit: int) -> BadInput | None:
    """Why a job's result cannot be stored (BadInput naming ``result``), or None when it can."""
    try:
        check_storable(result, "result")
        check_size(result, "result", limit)
    except BadInput as exc:
        return exc
    return None
