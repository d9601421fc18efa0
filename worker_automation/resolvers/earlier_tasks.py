"""A task id its job no longer holds: what became of the run it named.

A job gets a new task id each time it is sent again (a retry, a move, a reorder, a re-send by the
reconciler), and its row keeps only the newest. A caller that dispatched the job, or an LLM tool
polling the task, still holds the old id. The attempts table remembers the task id of every run
(migration 0003; looked up by task id since 0022): the run's outcome is that task's final state,
in Celery's words, with the job as it is now. An id that never ran (replaced while queued) has no
attempt: the caller falls back to Celery's result backend.
"""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import bindparam

from worker_automation.models import Attempt, AttemptOutcome, Job
from worker_automation.models.database import Database
from worker_automation.resolvers.job_views import JobView, enriched_select, views_of
from worker_automation.resolvers.reads import TaskStatus

# The newest run under the task id, and its job as it is now.
_LAST_RUN = (
    enriched_select()
    .add_columns(Attempt.outcome, Attempt.error)
    .join(Attempt, Attempt.worker_id == Job.id)
    .where(Attempt.task_id == bindparam("task_id"))
    .order_by(Attempt.number.desc())
    .limit(1)
)
_STATE: Final = {
    AttemptOutcome.CONCLUIDO.value: "SUCCESS",
    AttemptOutcome.FALHA.value: "FAILURE",
    AttemptOutcome.CANCELADO.value: "REVOKED",
    AttemptOutcome.REENFILEIRADO.value: "REVOKED",
}


async def earlier_task_status(db: Database, task_id: str) -> TaskStatus | None:
    """The final state of the run ``task_id`` named, if a job ran under it; None otherwise."""
    rows = await db.rows(_LAST_RUN, {"task_id": task_id})
    if not rows:
        return None
    row = rows[0]
    outcome, error = row[-2], row[-1]
    (job,) = views_of([row])
    state = _STATE.get(outcome, "STARTED")
    return TaskStatus(task_id, state, _result(outcome, error, job), job)


def _result(outcome: str | None, error: str | None, job: JobView) -> dict[str, Any] | None:
    if outcome == AttemptOutcome.FALHA.value:
        return {"exc_type": "AutomationError", "exc_message": error, "traceback": None}
    if outcome == AttemptOutcome.CANCELADO.value:
        return {"exc_type": "TaskRevokedError", "exc_message": error or "revoked"}
    if outcome == AttemptOutcome.REENFILEIRADO.value:
        return {"exc_type": "TaskRevokedError", "exc_message": replaced_by(job.task_id)}
    return None


def replaced_by(task_id: str | None) -> str:
    """What a task that another one replaced says of it."""
    return f"Task substituida por {task_id}"
