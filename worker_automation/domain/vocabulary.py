"""The words every layer shares: a job's states and which actions may move it, why a claim is
refused, and what an event says happened.

It imports nothing but the standard library, so worker processes use the same words as the API
without loading the database layer, and no layer spells a state or a reason out again.
"""

from __future__ import annotations

from enum import StrEnum


class JobStatus(StrEnum):
    """Life cycle of a job (the seed's words)."""

    AGENDADO = "AGENDADO"
    EXECUTANDO = "EXECUTANDO"
    CONCLUIDO = "CONCLUIDO"
    FALHA = "FALHA"
    CANCELADO = "CANCELADO"


TERMINAL_STATUSES: frozenset[JobStatus] = frozenset(
    {JobStatus.CONCLUIDO, JobStatus.FALHA, JobStatus.CANCELADO}
)
OPEN_STATUSES: frozenset[JobStatus] = frozenset({JobStatus.AGENDADO, JobStatus.EXECUTANDO})


class Action(StrEnum):
    """Something done to a job, by an operator (one job or in bulk) or by a worker."""

    CANCEL = "cancel"
    RETRY = "retry"
    MOVE = "move"
    REORDER = "reorder"
    CLAIM = "claim"
    COMPLETE = "complete"
    FAIL = "fail"


# The legal transitions: the states each action may take a job from (anything else is a 409 and
# changes nothing). Where it leaves the job: cancel -> CANCELADO; retry, move, reorder ->
# AGENDADO (a new task); claim -> EXECUTANDO; complete -> CONCLUIDO; fail -> FALHA.
ALLOWED_FROM: dict[Action, frozenset[JobStatus]] = {
    Action.CANCEL: frozenset({JobStatus.AGENDADO, JobStatus.EXECUTANDO}),
    Action.RETRY: frozenset({JobStatus.FALHA, JobStatus.CANCELADO}),
    Action.MOVE: frozenset({JobStatus.AGENDADO, JobStatus.EXECUTANDO}),
    Action.REORDER: frozenset({JobStatus.AGENDADO}),
    Action.CLAIM: frozenset({JobStatus.AGENDADO}),
    Action.COMPLETE: frozenset({JobStatus.EXECUTANDO}),
    Action.FAIL: frozenset({JobStatus.EXECUTANDO}),
}


class Refusal(StrEnum):
    """Why a claim was refused: an expected outcome, not a failure."""

    ALREADY_CLAIMED = "already_claimed"
    CONCURRENCY_LIMIT = "concurrency_limit"
    DEV_MODE = "dev_mode"
    AUTOMATION_DISABLED = "automation_disabled"
    WRONG_AUTOMATION = "wrong_automation"
    MACHINE_OFF = "machine_off"
    NOT_CLAIMABLE = "not_claimable"
    QUEUE_PAUSED = "queue_paused"


# Refusals that end by themselves (a slot frees up, the machine is turned back on, the automation
# leaves dev mode or is enabled again, the queue is resumed): the job is tried again later
# without anyone acting.
PASSING_REFUSALS: frozenset[Refusal] = frozenset(
    {
        Refusal.CONCURRENCY_LIMIT,
        Refusal.MACHINE_OFF,
        Refusal.DEV_MODE,
        Refusal.AUTOMATION_DISABLED,
        Refusal.QUEUE_PAUSED,
    }
)


class Fault(StrEnum):
    """What recovery found wrong with a job (the label of ``wa_jobs_recovered_total``)."""

    NOT_SENT = "not_sent"  # AGENDADO without a task id: the broker refused its send
    MESSAGE_LOST = "message_lost"  # AGENDADO whose message nobody holds (Redis lost it, say)
    WORKER_LOST = "worker_lost"  # EXECUTANDO that no process runs any more
    NOT_STARTED = "not_started"  # claimed, but its worker never had the answer: it never ran
    MACHINE_LOST = "machine_lost"  # EXECUTANDO on a dedicated machine whose subscription closed for good


# What a worker may report about a run of its own (``POST /api/v1/jobs/{id}/lost``).
REPORTED_FAULTS: frozenset[Fault] = frozenset({Fault.WORKER_LOST, Fault.NOT_STARTED})


class EventKind(StrEnum):
    """What happened to a job; ``resync`` is made locally after an outage and never published."""

    CREATED = "created"
    CLAIMED = "claimed"
    PROGRESS = "progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    MOVED = "moved"
    REORDERED = "reordered"
    DELETED = "deleted"
    RESYNC = "resync"


class QueueChange(StrEnum):
    """What happened to a queue itself: published on the event bus beside the job events, so that
    live views of the queues (queueLoad, dashboard) refresh at once; job subscribers skip them."""

    PAUSED = "queue_paused"
    RESUMED = "queue_resumed"
