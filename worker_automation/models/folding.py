"""``fold(text)``: lower case without accents, in SQL, the same on PostgreSQL and SQLite.

Operators type "metalurgica" and expect "Metalúrgica Aço Forte": text filters compare folded text.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import String

_ACCENTED = "áàâãäåéèêëíìîïóòôõöúùûüçñýÿ"
_PLAIN = "aaaaaaeeeeiiiiooooouuuucnyy"
SQLITE_FUNCTION = "wa_fold"


def fold_text(value: str) -> str:
    """The Python side of :class:`fold` (also registered as a SQLite function)."""
    decomposed = unicodedata.normalize("NFKD", value.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def sqlite_fold(value: Any) -> Any:
    return fold_text(value) if isinstance(value, str) else value


class fold(FunctionElement[str]):
    """Case- and accent-insensitive form of a text expression."""

    type = String()
    inherit_cache = True


@compiles(fold)
def _fold_default(element: fold, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{SQLITE_FUNCTION}({compiler.process(element.clauses, **kw)})"


@compiles(fold, "postgresql")
def _fold_postgresql(element: fold, compiler: SQLCompiler, **kw: Any) -> str:
    # translate() needs no extension (unaccent may not be installable on a managed server).
    return f"translate(lower({compiler.process(element.clauses, **kw)}), '{_ACCENTED}', '{_PLAIN}')"
