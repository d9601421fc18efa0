"""Page arithmetic shared by every paginated read."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Generic, TypeVar

from worker_automation.errors import BadInput

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
