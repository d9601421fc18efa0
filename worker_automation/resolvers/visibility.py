"""What a machine key may read of a job: all of it when the machine could claim the job, and only
its id, automation and queue otherwise.

Every machine still hears of every job (a queue worker watches the whole stream to know when to
look), but a job's context and result belong to the machines that run it.
"""

from __future__ import annotations

from typing import Any, Final

from worker_automation.resolvers.machines import MachineView

# The fields of a job any machine may read.
PUBLIC_JOB_FIELDS: Final = ("id", "automation_type", "queue")


def may_claim(machine: MachineView, automation_type: Any, queue: Any) -> bool:
    """Whether ``machine`` serves jobs of this automation and queue (the claim's own rule)."""
    if machine.automation is not None:
        return bool(machine.automation == automation_type)
    return bool(machine.queue == queue)


def job_for_machine(machine: MachineView, job: dict[str, Any]) -> dict[str, Any]:
    """``job`` (a view's dict) as ``machine`` may read it."""
    if may_claim(machine, job.get("automation_type"), job.get("queue")):
        return job
    return {name: job.get(name) for name in PUBLIC_JOB_FIELDS}
