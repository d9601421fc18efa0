"""What a dedicated machine hears of the runs it holds: those the API ended while they ran (an
operator's cancel or move, a time limit), so that it stops them.

Nothing else can stop such a run: a machine is no Celery worker to revoke. The API holds the
job meanwhile (``transitions.MACHINE_STOP_SECONDS``), so a retry starts nowhere beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from worker_automation.domain.errors import BadInput
from worker_automation.domain.vocabulary import EventKind
from worker_automation.models import Job, JobStatus
from worker_automation.models.database import Database
from worker_automation.resolvers.job_views import JobView, enriched_select, views_of
from worker_automation.resolvers.machines import MachineView
from worker_automation.resolvers.visibility import may_claim

# The most runs a machine may name at once (far above any concurrency a machine runs).
MAX_RUNNING: Final = 1000
# Events that never end a run the machine holds: a job queued, claimed, progressing or reordered in
# its queue, or completed (only the run that holds it reports that).
_NOT_AN_END: Final = frozenset(
    {EventKind.CREATED, EventKind.CLAIMED, EventKind.PROGRESS, EventKind.REORDERED, EventKind.COMPLETED}
)


async def ended_runs(db: Database, machine: MachineView, running: Sequence[int]) -> list[JobView]:
    """Of the jobs ``running`` (those ``machine`` says it runs), the ones it no longer runs as
    far as the API knows, as they stand now."""
    if len(running) > MAX_RUNNING:
        raise BadInput("running", f"no maximo {MAX_RUNNING} jobs")
    if not running:
        return []
    async with db.reader() as session:
        rows = await session.execute(enriched_select(documents=False).where(Job.id.in_(sorted(set(running)))))
    views = views_of(rows)
    return [v for v in views if v.status != JobStatus.EXECUTANDO.value or v.machine_id != machine.id]


def may_end_a_run(machine: MachineView, kind: EventKind, job: dict[str, Any]) -> bool:
    """Whether an event (``kind``, the job as it now stands) may end a run of ``machine``: a job
    it may run that left EXECUTANDO, last claimed by this machine (a cancelled or failed job keeps
    its machine) or by none (a job queued again forgets it). The machine knows which jobs it runs,
    and under which task."""
    return (
        kind not in _NOT_AN_END
        and job.get("status") != JobStatus.EXECUTANDO.value
        and job.get("machine_id") in (None, machine.id)
        and may_claim(machine, job.get("automation_type"), job.get("queue"))
    )
