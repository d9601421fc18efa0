"""Fuzzy search over the automation catalogue (``/search-automations``, ``searchAutomations``).

Queries are typed by operators in Portuguese, often without accents and with typos ("certidao
trabalhsta"), so text is compared accent- and case-insensitively with RapidFuzz.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rapidfuzz import fuzz

from worker_automation.catalog.registry import Automation
from worker_automation.models.folding import fold_text

MIN_SCORE = 60

_WORD = re.compile(r"[a-z0-9]+")
# Below this length a query word is too short for a prefix to mean anything ("de", "do").
_MIN_PREFIX = 3
# A prefix match ("trab" for "trabalhista") is good evidence but weaker than the whole word.
_PREFIX_WEIGHT = 0.9


@dataclass(frozen=True)
class AutomationSearchItem:
    """One automation as the search shows it; ``score`` is None when no query was given."""

    key: str
    display_name: str
    category: str
    queue: str
    requires_selenium: bool
    score: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of the seed: six keys with a query, no ``score`` without one."""
        item: dict[str, Any] = {
            "key": self.key,
            "display_name": self.display_name,
            "category": self.category,
            "queue": self.queue,
            "requires_selenium": self.requires_selenium,
        }
        if self.score is not None:
            item["score"] = self.score
        return item


@dataclass(frozen=True)
class AutomationSearchResult:
    """What a search found; without a query, the whole catalogue flat and grouped by category."""

    query: str | None
    results: tuple[AutomationSearchItem, ...]
    by_category: dict[str, list[AutomationSearchItem]] | None = None

    @property
    def count(self) -> int:
        """How many automations were found (for "N automacao(oes) encontrada(s)")."""
        return len(self.results)

    @property
    def total(self) -> int:
        """Same as ``count``; the name the no-query response uses."""
        return len(self.results)

    def to_dict(self) -> dict[str, Any]:
        """``{"results"}`` with a query; ``{"results", "by_category", "total"}`` without one."""
        data: dict[str, Any] = {"results": [item.to_dict() for item in self.results]}
        if self.by_category is not None:
            data["by_category"] = {
                category: [item.to_dict() for item in items] for category, items in self.by_category.items()
            }
            data["total"] = self.total
        return data


def normalize(text: str) -> str:
    """Lowercase, without accents: "Certidões" and "certidoes" compare equal."""
    return " ".join(fold_text(text).split())


def search_automations(automations: Iterable[Automation], q: str | None) -> AutomationSearchResult:
    """Automations matching ``q`` (score >= 60, best first), or every automation when ``q`` is blank."""
    catalogue = list(automations)
    query = normalize(q) if q is not None else ""
    if not query:
        items = tuple(_item(automation, None) for automation in catalogue)
        grouped: dict[str, list[AutomationSearchItem]] = {}
        for item in items:
            grouped.setdefault(item.category, []).append(item)
        return AutomationSearchResult(query=None, results=items, by_category=grouped)
    scored = [_item(automation, score_automation(query, automation)) for automation in catalogue]
    found = [item for item in scored if item.score is not None and item.score >= MIN_SCORE]
    found.sort(key=lambda item: (-(item.score or 0), normalize(item.display_name), item.key))
    return AutomationSearchResult(query=q.strip() if q else None, results=tuple(found))


def score_automation(query: str, automation: Automation) -> int:
    """How well an already normalised ``query`` matches ``automation``, 0..100.

    The best of two views over key, display name and category: ``token_sort_ratio`` on the whole
    text (near-exact phrases in any order) and a word-by-word match in which every query word is
    paired with its closest word of the text (typos and prefixes of single words, which whole-text
    ratios under-score against long names). WRatio's substring matching is deliberately left out:
    it let short queries hit unrelated names ("das" inside "cadastral").
    """
    texts = (
        normalize(automation.key.replace("_", " ").replace(".", " ")),
        normalize(automation.display_name),
        normalize(automation.category),
    )
    # Longer query words carry more of the intent, so they weigh more in the word-by-word score.
    query_words = _WORD.findall(query)
    best = 0.0
    for text in texts:
        best = max(best, fuzz.token_sort_ratio(query, text), _word_score(query_words, _WORD.findall(text)))
    return round(best)


def _word_score(query_words: list[str], text_words: list[str]) -> float:
    if not query_words or not text_words:
        return 0.0
    total = 0.0
    weight = 0
    for word in query_words:
        # Linking words ("de", "do", "e") would otherwise pair with any short query word.
        candidates = (
            [c for c in text_words if len(c) >= _MIN_PREFIX] if len(word) >= _MIN_PREFIX else text_words
        )
        total += len(word) * max((_word_similarity(word, c) for c in candidates), default=0.0)
        weight += len(word)
    return total / weight


def _word_similarity(word: str, candidate: str) -> float:
    similarity = float(fuzz.ratio(word, candidate))
    if len(word) >= _MIN_PREFIX and len(candidate) > len(word):
        prefix = fuzz.ratio(word, candidate[: len(word)]) * _PREFIX_WEIGHT
        similarity = max(similarity, prefix)
    return similarity


def _item(automation: Automation, score: int | None) -> AutomationSearchItem:
    return AutomationSearchItem(
        key=automation.key,
        display_name=automation.display_name,
        category=automation.category,
        queue=automation.queue,
        requires_selenium=automation.requires_selenium,
        score=score,
    )
