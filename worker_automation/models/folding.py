"""``fold(text)``: lower case without accents, in SQL, the same on PostgreSQL and SQLite.

Operators type "metalurgica" and expect "Metalúrgica Aço Forte": text filters compare folded text.
Python folds with the very table PostgreSQL's ``translate()`` is given, so a needle folded here
matches what either database folds (letters outside the table, "ª" or "º", stay as they are on
both). :class:`like_text` with :func:`like_literal` matches a needle as it is, ``%`` and ``_``
included.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import Boolean, String

_ACCENTED = "áàâãäåéèêëíìîïóòôõöúùûüçñýÿ"
_PLAIN = "aaaaaaeeeeiiiiooooouuuucnyy"
SQLITE_FUNCTION = "wa_fold"
_FOLDING = str.maketrans(_ACCENTED, _PLAIN)
# What LIKE reads as wildcards or as its escape (a backslash: PostgreSQL's default, SQLite's
# when told so), each escaped so a needle matches only itself.
_LIKE_LITERAL = str.maketrans({"\\": "\\\\", "%": "\\%", "_": "\\_"})


def fold_text(value: str) -> str:
    """The Python side of :class:`fold` (also registered as a SQLite function)."""
    return value.lower().translate(_FOLDING)


def like_literal(text: str) -> str:
    """``text`` inside a LIKE pattern of :class:`like_text` (or of a statement that escapes with
    a backslash): every character stands for itself."""
    return text.translate(_LIKE_LITERAL)


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


class like_text(FunctionElement[bool]):
    """``expression LIKE pattern`` with a backslash escaping the next character of the pattern, on
    both databases (arguments: the expression, the pattern; see :func:`like_literal`)."""

    type = Boolean()
    inherit_cache = True


@compiles(like_text)
def _like_default(element: like_text, compiler: SQLCompiler, **kw: Any) -> str:
    expression, pattern = (compiler.process(c, **kw) for c in element.clauses)
    return f"{expression} LIKE {pattern} ESCAPE '\\'"


@compiles(like_text, "postgresql")
def _like_postgresql(element: like_text, compiler: SQLCompiler, **kw: Any) -> str:
    # A backslash is PostgreSQL's escape when none is named; the statement stays the one its
    # trigram indexes were planned for.
    expression, pattern = (compiler.process(c, **kw) for c in element.clauses)
    return f"{expression} LIKE {pattern}"
