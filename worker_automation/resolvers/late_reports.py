"""A finished run keeps its outcome: a report that arrives after recovery ended its run wins.

Recovery ends a run whose outcome it cannot know (its worker silent, its machine gone) with a
failure naming the fault. The run may have finished all the same, its report held in the worker's
outbox while the API or its database was away, and delivered after the reconciler's window. That
report is the truth about the run: it replaces the guessed failure, with an audit entry
(``late_report``) and the usual announcement.

Only the very run recovery ended, and only while nothing came after it: the job still FALHA from
recovery, under the same task id, last held by the reporting machine. A job retried since has a
new task id (and possibly a new run): the report of the old run is refused as before.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from worker_automation.domain.vocabulary import Fault
from worker_automation.models import Job, JobStatus
from worker_automation.resolvers.audit import Actor, AuditNote
from worker_automation.resolvers.machines import MachineView

log = logging.getLogger(__name__)

# The ``exc_type`` recovery writes in the result of a run it ended, per fault.
LOST_EXC_TYPES: Final[dict[Fault, str]] = {
    Fault.WORKER_LOST: "WorkerLost",
    Fault.MACHINE_LOST: "MachineLost",
}
_REPLACEABLE: Final = frozenset(LOST_EXC_TYPES.values())


def ended_by_recovery(row: Job) -> str | None:
    """The ``exc_type`` of the failure recovery wrote on ``row``, None when it did not end it."""
    if row.status != JobStatus.FALHA.value or not isinstance(row.result, dict):
        return None
    exc_type = row.result.get("exc_type")
    return exc_type if exc_type in _REPLACEABLE else None


def replaces_lost_run(row: Job, machine: MachineView, task_id: str | None) -> str | None:
    """Whether a report by ``machine`` about run ``task_id`` is the late outcome of the run
    recovery ended on ``row`` (locked): the replaced ``exc_type``, or None."""
    if task_id is None or row.task_id != task_id or row.machine_id != machine.id:
        return None
    return ended_by_recovery(row)


async def record_late_report(
    session: Any, row: Job, machine: MachineView, replaced: str, values: dict[str, Any]
) -> None:
    """Audit the late report in the report's own transaction (it changes the row's outcome)."""
    note = AuditNote(
        f"worker:{row.id}",
        {"replaced": replaced, "status": values.get("status"), "task_id": row.task_id},
    )
    await note.record_in(session, Actor(f"machine:{machine.name}"), "late_report")
    log.warning(
        "job %s: late report of run %s recorded (%s), replacing %s",
        row.id,
        row.task_id,
        values.get("status"),
        replaced,
    )
