"""Which states each operator action may take a job from, and what it writes on the row.

One table for the single-job actions (cancelWorker, retryWorker, ...) and their bulk forms
(cancelWorkers, retryWorkers): a job's own rules are the same whichever way it is acted on.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from worker_automation.catalog.registry import TIME_LIMIT_GRACE_SECONDS
from worker_automation.domain.vocabulary import ALLOWED_FROM, Action
from worker_automation.models import Job, JobStatus, utcnow
from worker_automation.resolvers.rows import require_status

CANCEL_MESSAGE = "Cancelado pelo operador"

# How long a run the API ends on a dedicated machine (an operator's cancel or move, a time limit)
# keeps the job from running again. Nothing can stop such a run from here: its machine hears the
# end (its runsEnded subscription, at once, or when it subscribes again, within a few seconds)
# and stops it, waiting up to the time limit's grace for a thread that cannot be interrupted. No
# retry starts elsewhere beside it meanwhile.
MACHINE_STOP_SECONDS: Final = TIME_LIMIT_GRACE_SECONDS + 5.0


# The verb of each action in the conflict message ("Nao e possivel <verb> um worker ...").
_VERBS: dict[Action, str] = {
    Action.CANCEL: "cancelar",
    Action.RETRY: "re-enfileirar",
    Action.MOVE: "mover",
    Action.REORDER: "reordenar",
}


def allows(action: Action, status: str) -> bool:
    """Whether ``action`` may take a job in ``status``."""
    return status in ALLOWED_FROM[action]


def require(row: Job, action: Action) -> None:
    """Conflict (409) naming the current status when ``action`` may not take ``row``."""
    require_status(row, set(ALLOWED_FROM[action]), _VERBS[action])


def back_in_queue(row: Job, task_id: str | None) -> None:
    """The job waits again under a new task (None: sent later): not started, no machine, no
    progress (nor the last progress message of the run that is over), no backoff to wait for."""
    row.task_id = task_id
    row.next_attempt_at = None
    row.status = JobStatus.AGENDADO.value
    row.progress = 0
    row.data_inicio = None
    row.machine_id = None
    if row.metadata_json and "progress_message" in row.metadata_json:
        rest = {key: value for key, value in row.metadata_json.items() if key != "progress_message"}
        row.metadata_json = rest or None


def hold_after_machine_run(row: Job) -> None:
    """The run of ``row`` (EXECUTANDO on a dedicated machine) is being ended by the API: the job
    may run again no sooner than :data:`MACHINE_STOP_SECONDS` from now (see :func:`held_until`)."""
    row.next_attempt_at = utcnow() + timedelta(seconds=MACHINE_STOP_SECONDS)


def held_until(row: Job) -> datetime | None:
    """Until when the job of ``row`` may not run: the hold the end of a dedicated machine's run
    left (see :func:`hold_after_machine_run`), or the backoff of a retry not sent yet, while it
    lasts; else None. Read before the row is queued again, which clears it."""
    if row.next_attempt_at is None or row.next_attempt_at <= utcnow():
        return None
    if row.status == JobStatus.AGENDADO.value and row.task_id is not None:
        return None  # sent: claims compare the time themselves
    return row.next_attempt_at


def mark_cancelled(row: Job, message: str = CANCEL_MESSAGE) -> None:
    """The job ends CANCELADO now, with ``message``."""
    row.status = JobStatus.CANCELADO.value
    row.data_fim = utcnow()
    row.mensagem_erro = message


def mark_retried(row: Job, task_id: str | None) -> None:
    """A failed or cancelled job queued again under ``task_id``, ``retry_count`` + 1."""
    back_in_queue(row, task_id)
    row.retry_count += 1
    row.data_fim = None
    row.mensagem_erro = None
    row.result = None
