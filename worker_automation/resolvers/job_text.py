"""The job list's free-text filter (``q``): what it matches and the parameters it binds.

Operators paste a CNPJ, a protocol number or a name they typed into a job's input, so ``q``
matches the values of the job's context as well as its task id, client, error message and
automation. Only values match, never the keys every job of an automation shares ("cnpj").
Matching ignores case and accents, as every text filter does (see ``models.folding``).

On PostgreSQL the context's text form is tested first, and only the rows that pass have their
values walked and folded. Read row by row, it is tested lower-cased only against a pattern in
which every letter an accent can hide behind matches any one character ("metal_rg_c_" for
"metalurgica"), several times cheaper than folding the whole text, then folded against the
needle as it reads inside a JSON text. The folded text is what a trigram index holds
(``pg_trgm``, see migration 0013): every alternative of the search is then one an index answers
(the client and the automation too, as ``= ANY`` of an array, which an index takes where ``IN``
a subquery or an empty list is not), so a search combines the rows each index finds instead of
reading every row.
On SQLite the values are walked directly (the stored text escapes accented letters).
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Text,
    bindparam,
    cast,
    func,
    or_,
    select,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

from worker_automation.models import Cliente, Job
from worker_automation.models.folding import SQLITE_FUNCTION, fold, fold_text, like_literal, like_text
from worker_automation.resolvers.one_of import one_of

# The letters fold() reaches from accented ones (see models.folding): in the loose pattern of a
# document's text each stands for any one character.
_FOLDED_LETTERS = frozenset("aeioucny")


class context_value_matches(FunctionElement[bool]):
    """Whether a scalar value anywhere in a JSON document matches a LIKE pattern once folded
    (arguments: the document, the folded pattern, the pattern of its JSON-escaped form)."""

    type = Boolean()
    inherit_cache = True


@compiles(context_value_matches)
def _matches_sqlite(element: context_value_matches, compiler: SQLCompiler, **kw: Any) -> str:
    document, pattern, _, _ = (compiler.process(c, **kw) for c in element.clauses)
    return (
        f"EXISTS (SELECT 1 FROM json_tree({document}) AS wa_value "
        f"WHERE wa_value.atom IS NOT NULL AND {SQLITE_FUNCTION}(wa_value.atom) LIKE {pattern} ESCAPE '\\')"
    )


@compiles(context_value_matches, "postgresql")
def _matches_postgresql(element: context_value_matches, compiler: SQLCompiler, **kw: Any) -> str:
    document, pattern, json_pattern, loose_pattern = element.clauses
    lowered = compiler.process(func.lower(cast(document, Text)), **kw)
    as_text = compiler.process(fold(cast(document, Text)), **kw)
    value = compiler.process(fold(_ValueText()), **kw)
    return (
        f"({lowered} LIKE {compiler.process(loose_pattern, **kw)} "
        f"AND {as_text} LIKE {compiler.process(json_pattern, **kw)} AND EXISTS (SELECT 1 FROM "
        f"jsonb_path_query({compiler.process(document, **kw)}, 'strict $.**') AS wa_value(v) "
        f"WHERE jsonb_typeof(wa_value.v) NOT IN ('object', 'array') "
        f"AND {value} LIKE {compiler.process(pattern, **kw)}))"
    )


class _ValueText(ColumnElement[str]):
    """The text of the JSON scalar ``wa_value.v`` (PostgreSQL)."""

    inherit_cache = True


@compiles(_ValueText)
def _value_text(element: _ValueText, compiler: SQLCompiler, **kw: Any) -> str:
    return "(wa_value.v #>> '{}')"


def text_search() -> ColumnElement[bool]:
    """Free text, ignoring case and accents: task id, client, error message, an automation
    whose key or name matches, or a value of the context (parameters from
    :func:`text_parameters`)."""
    clients = select(Cliente.id).where(like_text(fold(Cliente.razao_social), bindparam("text_pattern")))
    return or_(
        Job.task_id == bindparam("text_exact"),
        one_of(Job.cliente_id, clients.scalar_subquery()),
        like_text(fold(Job.mensagem_erro), bindparam("text_pattern")),
        one_of(Job.automation_type, bindparam("text_automations")),
        context_value_matches(
            Job.context,
            bindparam("text_pattern"),
            bindparam("text_json_pattern"),
            bindparam("text_loose_pattern"),
        ),
    )


def text_parameters(q: str) -> dict[str, Any]:
    """The parameters of :func:`text_search` for the text ``q`` (already stripped)."""
    from worker_automation.catalog.registry import AUTOMATION_REGISTRY

    needle = fold_text(q)
    keys = [
        a.key
        for a in AUTOMATION_REGISTRY.values()
        if needle in fold_text(a.display_name) or needle in fold_text(a.key)
    ]
    # The needle as it reads inside a JSON document's text (quotes and backslashes escaped), then
    # escaped for LIKE (where a backslash escapes the next character, and % and _ are wildcards);
    # loose, its letters that stand for accented ones left to match any character.
    escaped = like_literal(json.dumps(needle, ensure_ascii=False)[1:-1])
    loose = "".join("_" if ch in _FOLDED_LETTERS else ch for ch in escaped)
    return {
        "text_exact": q,
        "text_pattern": f"%{like_literal(needle)}%",
        "text_json_pattern": f"%{escaped}%",
        "text_loose_pattern": f"%{loose}%",
        "text_automations": keys,
    }
