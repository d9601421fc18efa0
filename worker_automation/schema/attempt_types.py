"""The GraphQL type of one run of a job (``Job.attempts``)."""

from __future__ import annotations

from worker_automation.resolvers.attempts import AttemptView
from worker_automation.schema.derived import FromView, derived


@derived(
    AttemptView, description="One run of a job: one per claim, kept across retries.", hide=("worker_id",)
)
class Attempt(FromView):
    """A claim of the job by a machine, and how that run ended."""
