"""GraphQL object types of the automation catalogue and its fuzzy search."""

from __future__ import annotations

import strawberry

from worker_automation.catalog.forms import form_schema
from worker_automation.catalog.registry import Automation as AutomationDefinition
from worker_automation.resolvers.search import AutomationSearchItem as SearchItemView
from worker_automation.resolvers.search import AutomationSearchResult
from worker_automation.schema.scalars import JSON


@strawberry.type(description="An automation of the registry, with the limits in force right now.")
class Automation:
    """A runnable automation and the rules its jobs are dispatched and claimed under."""

    key: str = strawberry.field(description="Registry key (a job's automationType).")
    display_name: str = strawberry.field(description="Friendly name.")
    category: str = strawberry.field(description="Catalogue category.")
    queue: str = strawberry.field(description="Celery queue its jobs run on.")
    requires_selenium: bool = strawberry.field(description="Whether it drives a browser.")
    task_name: str = strawberry.field(description="Celery task name.")
    max_concurrent_jobs: int = strawberry.field(description="Jobs of it that may run at once.")
    dev_mode: bool = strawberry.field(description="In development: its jobs are not claimed.")
    enabled: bool = strawberry.field(description="Disabled automations cannot be dispatched.")
    description: str = strawberry.field(description="What it does.")
    max_attempts: int = strawberry.field(
        description="Runs a job gets in all: a failed run with attempts left is retried (1: no retry)."
    )
    retry_backoff_seconds: int = strawberry.field(
        description="Base of the wait before a retry: exponential from it, full jitter."
    )
    retry_backoff_max_seconds: int = strawberry.field(description="Cap of the wait before a retry.")
    timeout_seconds: float | None = strawberry.field(
        description="Time limit of one run in seconds (null: none): a run past it ends FALHA "
        "'timeout: ...' as one attempt, retried like any failure."
    )
    form: JSON = strawberry.field(
        description="The fields its dispatch context must carry: {allow_extra, fields: [{name, type, ...}]}."
    )

    @classmethod
    def from_definition(cls, automation: AutomationDefinition) -> Automation:
        """Build from the registry entry (with its run-time overrides applied)."""
        return cls(
            key=automation.key,
            display_name=automation.display_name,
            category=automation.category,
            queue=automation.queue,
            requires_selenium=automation.requires_selenium,
            task_name=automation.task_name,
            max_concurrent_jobs=automation.max_concurrent_jobs,
            dev_mode=automation.dev_mode,
            enabled=automation.enabled,
            description=automation.description,
            max_attempts=automation.max_attempts,
            retry_backoff_seconds=automation.retry_backoff_seconds,
            retry_backoff_max_seconds=automation.retry_backoff_max_seconds,
            timeout_seconds=automation.timeout_seconds,
            form=JSON(form_schema(automation.form)),
        )


@strawberry.type(description="An automation found by searchAutomations.")
class AutomationSearchItem:
    """One search hit."""

    key: str = strawberry.field(description="Registry key.")
    display_name: str = strawberry.field(description="Friendly name.")
    category: str = strawberry.field(description="Catalogue category.")
    queue: str = strawberry.field(description="Celery queue.")
    requires_selenium: bool = strawberry.field(description="Whether it drives a browser.")
    score: int | None = strawberry.field(description="Match score 60..100; null when no query was given.")

    @classmethod
    def from_view(cls, item: SearchItemView) -> AutomationSearchItem:
        """Build from the resolver's search item."""
        return cls(
            key=item.key,
            display_name=item.display_name,
            category=item.category,
            queue=item.queue,
            requires_selenium=item.requires_selenium,
            score=item.score,
        )


@strawberry.type(description="The automations of one category.")
class AutomationCategory:
    """A catalogue category and its automations."""

    category: str = strawberry.field(description="Category name.")
    automations: list[AutomationSearchItem] = strawberry.field(description="Its automations.")


@strawberry.type(description="Result of searchAutomations: best hits first, or everything without q.")
class AutomationSearch:
    """Search results; without a query also grouped by category."""

    query: str | None = strawberry.field(description="The query searched for; null without one.")
    count: int = strawberry.field(description="How many automations are in results.")
    results: list[AutomationSearchItem] = strawberry.field(description="Hits with score >= 60, best first.")
    by_category: list[AutomationCategory] | None = strawberry.field(
        description="Without a query: every automation grouped by category; null with one."
    )

    @classmethod
    def from_view(cls, found: AutomationSearchResult) -> AutomationSearch:
        """Build from the resolver's search result."""
        grouped = None
        if found.by_category is not None:
            grouped = [
                AutomationCategory(
                    category=category, automations=[AutomationSearchItem.from_view(i) for i in items]
                )
                for category, items in found.by_category.items()
            ]
        return cls(
            query=found.query,
            count=found.count,
            results=[AutomationSearchItem.from_view(i) for i in found.results],
            by_category=grouped,
        )
