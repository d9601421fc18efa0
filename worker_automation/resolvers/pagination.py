"""Page arithmetic shared by every paginated read."""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

from worker_automation.errors import BadInput
from worker_automation.limits import INT32_MAX

MAX_PER_PAGE = 100
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
    """One page of items with the totals the documented contract carries."""

    items: list[T]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return math.ceil(self.total / self.per_page) if self.total else 0


# Cursors are opaque to clients: the job's id behind a fixed prefix, base64url-encoded, so that
# nobody builds one by hand and the format can change without breaking a client that only
# passes back what it was given.
_CURSOR_PREFIX = "worker:"


def cursor_of(job_id: int) -> str:
    """The cursor that points just after the job ``job_id`` in the newest-first list."""
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{job_id}".encode()).decode().rstrip("=")


def id_of_cursor(cursor: str, field: str = "after") -> int:
    """The job id inside ``cursor``; BadInput naming ``field`` for anything not made by
    :func:`cursor_of`."""
    invalid = BadInput(field, f"{field} invalido: {cursor[:80]!r} (use o endCursor de uma pagina)")
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("ascii")
    except (ValueError, UnicodeError):
        raise invalid from None
    digits = text.removeprefix(_CURSOR_PREFIX)
    if digits == text or not digits.isdigit() or not 0 < len(digits) <= 10:
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
