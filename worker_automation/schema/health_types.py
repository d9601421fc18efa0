"""GraphQL type of an automation's health over days (``automationHealth``)."""

from __future__ import annotations

from worker_automation.resolvers.health import HealthDay
from worker_automation.schema.derived import FromView, derived


@derived(HealthDay, description="How one automation's jobs ended on one day, and how long its runs took.")
class AutomationHealthDay(FromView):
    """One day of automationHealth."""
