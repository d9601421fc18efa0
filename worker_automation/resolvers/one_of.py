"""``column`` equals one of a list, written so the list is one parameter on PostgreSQL.

``IN`` of a list expanded at execution makes a new statement text for each length and needs
SQLAlchemy to render it every time; ``= ANY`` of one array parameter is one text, which the
driver can run itself (see ``Database.rows``) and an index takes as it takes ``IN``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ARRAY, BindParameter, Boolean, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class one_of(FunctionElement[bool]):
    """Whether a column equals one of a list: ``= ANY`` of an array of the column's type on
    PostgreSQL (arguments: the column, then the list's parameter, or a subquery of its values),
    ``IN`` elsewhere."""

    type = Boolean()
    inherit_cache = True


@compiles(one_of)
def _one_of_default(element: one_of, compiler: SQLCompiler, **kw: Any) -> str:
    column, values = element.clauses
    if isinstance(values, BindParameter):
        values = bindparam(values.key, expanding=True)
    return f"({compiler.process(column.in_(values), **kw)})"


@compiles(one_of, "postgresql")
def _one_of_postgresql(element: one_of, compiler: SQLCompiler, **kw: Any) -> str:
    column, values = element.clauses
    if isinstance(values, BindParameter):
        array = compiler.process(bindparam(values.key, type_=ARRAY(column.type)), **kw)
    else:
        array = f"ARRAY{compiler.process(values, **kw)}"
    return f"{compiler.process(column, **kw)} = ANY ({array})"
