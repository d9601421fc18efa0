"""Page arithmetic shared by every paginated read."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from worker_automation.domain.errors import BadInput
from worker_automation.domain.limits import INT32_MAX
from worker_automation.domain.ranges import MAX_PER_PAGE
from worker_automation.resolvers.job_order import JobOrder, key_text, key_value

T = TypeVar("T")


@dataclass(frozen=True)
class PageRequest:
    """A validated page number and size (``per_page`` silently capped at 100)."""

    page: int
    per_page: int

    @classmethod
    def of(cls, page: int | None, per_page: int | None, *, default_per_page: int) -> PageRequest:
        page = 1 if page is None else page
        per_page = default_per_page if per_page is None else per_page
        if page < 1:
            raise BadInput("page", "page deve ser um inteiro maior ou igual a 1")
        if per_page < 1:
            raise BadInput("per_page", "per_page deve ser um inteiro maior ou igual a 1")
        return cls(page, min(per_page, MAX_PER_PAGE))

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of items with the totals the documented contract carries (and, for the job
    list, the cursors of its first and last items)."""

    items: list[T]
    total: int
    page: int
    per_page: int
    start_cursor: str | None = None
    end_cursor: str | None = None

    @property
    def pages(self) -> int:
        return math.ceil(self.total / self.per_page) if self.total else 0


# Cursors are opaque to clients: the job's id behind a fixed prefix, base64url-encoded, so that
# nobody builds one by hand and the format can change without breaking a client that only
# passes back what it was given. A cursor of an explicit order also carries the order and the
# job's sort key (``FIELD|DIRECTION|key|id``).
_CURSOR_PREFIX = "worker:"


def cursor_of(job_id: int) -> str:
    """The cursor that points just after the job ``job_id`` in the newest-first list."""
    return _encode(str(job_id))


def ordered_cursor_of(order: JobOrder, key: Any, job_id: int) -> str:
    """The cursor that points just after the job ``job_id``, whose sort key is ``key``, in the
    list sorted by ``order``: the order travels with it, so it is refused by any other order."""
    text = "|".join((order.field.value, order.direction.value, key_text(order, key), str(job_id)))
    return _encode(text)


def _encode(text: str) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{text}".encode()).decode().rstrip("=")


def position_of_cursor(cursor: str, order: JobOrder | None, field: str = "after") -> tuple[Any, int]:
    """The sort key (None for the default order) and the job id inside ``cursor``; BadInput
    naming ``field`` for anything not made for ``order`` by :func:`cursor_of` or
    :func:`ordered_cursor_of`."""
    text = _decoded(cursor, field)
    invalid = _invalid(cursor, field)
    parts = text.split("|")
    made_for = f"{parts[0]}:{parts[1]}".lower() if len(parts) == 4 else None
    wanted = order.name if order is not None else None
    if made_for != wanted:
        other = made_for or "newest first"
        raise BadInput(field, f"{field} e de outra ordem ({other}): volte a primeira pagina desta ordem")
    if order is None:
        return None, _job_id(text, invalid)
    try:
        key = key_value(order, parts[2])
    except (ValueError, OverflowError):
        raise invalid from None
    return key, _job_id(parts[3], invalid)


def _invalid(cursor: str, field: str) -> BadInput:
    return BadInput(field, f"{field} invalido: {cursor[:80]!r} (use o endCursor de uma pagina)")


def _decoded(cursor: str, field: str) -> str:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (ValueError, UnicodeError):
        raise _invalid(cursor, field) from None
    if not text.startswith(_CURSOR_PREFIX):
        raise _invalid(cursor, field)
    return text.removeprefix(_CURSOR_PREFIX)


def _job_id(digits: str, invalid: BadInput) -> int:
    if not digits.isdigit() or not 0 < len(digits) <= 10:
        raise invalid
    job_id = int(digits)
    if job_id > INT32_MAX:
        raise invalid
    return job_id


def slice_size(first: int | None, per_page: int) -> int:
    """How many jobs a cursor slice holds: ``first`` (else ``per_page``), capped like pages."""
    size = per_page if first is None else first
    if size < 1:
        raise BadInput(
            "first" if first is not None else "per_page", "first deve ser um inteiro maior ou igual a 1"
        )
    return min(size, MAX_PER_PAGE)
