"""The Mutation root: thin translations onto the resolvers, which own rules, transactions and audit."""

from __future__ import annotations

import strawberry

from worker_automation.domain.ranges import PRIORITY_RANGE
from worker_automation.resolvers import job_actions, machines, maintenance, recovery
from worker_automation.resolvers.automations import update_settings
from worker_automation.resolvers.dispatch import dispatch_keyed, dispatch_many
from worker_automation.schema.catalog import Automation
from worker_automation.schema.context import Info
from worker_automation.schema.enums import ClearScope
from worker_automation.schema.fields import mutation
from worker_automation.schema.inputs import DispatchInput
from worker_automation.schema.operator_mutation import OperatorMutation
from worker_automation.schema.permissions import manager, write
from worker_automation.schema.results import (
    CleanupResult,
    ClearQueueResult,
    PurgeQueueResult,
    ReconcileResult,
    RegisteredMachine,
    SyncOrphansResult,
)
from worker_automation.schema.types import Job, Machine


@strawberry.type(
    description=(
        "Actions. Job actions and dispatch need worker_automation:write; maintenance, machines and "
        "settings also need perfil administrador or diretoria."
    )
)
class Mutation(OperatorMutation):
    """Write entry points; every one is recorded in the audit log by its resolver."""

    @mutation(
        description=(
            "Create a job and hand it to its queue; returns the new job (AGENDADO), or with an "
            "idempotencyKey sent before, the job that request made."
        ),
        extensions=write(),
    )
    async def dispatch_automation(self, info: Info, input: DispatchInput) -> Job:
        principal = await info.context.principal()
        (view,) = (await dispatch_keyed(info.context.services, principal.actor, input.request())).views
        return Job.from_view(view, info.context.tz)

    @mutation(
        description=(
            "Create a batch of jobs (up to 500) in one transaction: all of them, or none when one is "
            "invalid (the error names inputs[i].field); returns the new jobs in the order given."
        ),
        extensions=write(),
    )
    async def dispatch_automations(self, info: Info, inputs: list[DispatchInput]) -> list[Job]:
        principal = await info.context.principal()
        requests = [i.request() for i in inputs]
        views = await dispatch_many(info.context.services, principal.actor, requests, field="inputs")
        return [Job.from_view(view, info.context.tz) for view in views]

    @mutation(description="Cancel a queued or running job (its task is revoked).", extensions=write())
    async def cancel_worker(self, info: Info, id: int) -> Job:
        principal = await info.context.principal()
        view = await job_actions.cancel(info.context.services, principal.actor, id)
        return Job.from_view(view, info.context.tz)

    @mutation(description="Queue a failed or cancelled job again as a new task.", extensions=write())
    async def retry_worker(self, info: Info, id: int) -> Job:
        principal = await info.context.principal()
        view = await job_actions.retry(info.context.services, principal.actor, id)
        return Job.from_view(view, info.context.tz)

    @mutation(description="Send a queued or running job to another queue.", extensions=write())
    async def move_worker(self, info: Info, id: int, target_queue: str) -> Job:
        principal = await info.context.principal()
        view = await job_actions.move(info.context.services, principal.actor, id, target_queue)
        return Job.from_view(view, info.context.tz)

    @mutation(
        description=f"Change a queued job's priority ({PRIORITY_RANGE}, lower first).", extensions=write()
    )
    async def reorder_worker(self, info: Info, id: int, new_priority: int) -> Job:
        principal = await info.context.principal()
        view = await job_actions.reorder(info.context.services, principal.actor, id, new_priority)
        return Job.from_view(view, info.context.tz)

    @mutation(
        description="Cancel every open job of a scope, optionally on one queue (managers only).",
        extensions=manager(),
    )
    async def clear_queue(
        self, info: Info, scope: ClearScope = ClearScope.ALL, queue: str | None = None
    ) -> ClearQueueResult:
        principal = await info.context.principal()
        result = await maintenance.clear_queue(info.context.services, principal.actor, scope.value, queue)
        return ClearQueueResult.from_view(result)

    @mutation(
        description="Delete a queue's messages in the broker; needs confirm: true (managers only).",
        extensions=manager(),
    )
    async def purge_queue(self, info: Info, queue_name: str, confirm: bool = False) -> PurgeQueueResult:
        principal = await info.context.principal()
        result = await maintenance.purge_queue(info.context.services, principal.actor, queue_name, confirm)
        return PurgeQueueResult.from_view(result)

    @mutation(description="Delete open jobs whose client is missing (managers only).", extensions=manager())
    async def cleanup_no_client(self, info: Info) -> CleanupResult:
        principal = await info.context.principal()
        return CleanupResult.from_view(
            await maintenance.cleanup_no_client(info.context.services, principal.actor)
        )

    @mutation(
        description="Cancel open jobs that lost their task in the broker (managers only).",
        extensions=manager(),
    )
    async def sync_orphans(self, info: Info) -> SyncOrphansResult:
        principal = await info.context.principal()
        result = await maintenance.sync_orphans(info.context.services, principal.actor)
        return SyncOrphansResult.from_view(result)

    @mutation(
        description=(
            "Run the reconciler now: send again the queued jobs no message will run, end or queue "
            "again the runs no process carries on (managers only)."
        ),
        extensions=manager(),
    )
    async def reconcile(self, info: Info) -> ReconcileResult:
        principal = await info.context.principal()
        report = await recovery.reconcile(info.context.services, principal.actor)
        return ReconcileResult.from_view(report)

    @mutation(
        description="Register a machine serving one automation or one queue; its key is shown once.",
        extensions=manager(),
    )
    async def register_machine(
        self, info: Info, name: str, automation: str | None = None, queue: str | None = None
    ) -> RegisteredMachine:
        principal = await info.context.principal()
        services = info.context.services
        created = await machines.register_machine(
            services.db,
            principal.actor,
            services.settings.queues,
            name=name,
            automation=automation,
            queue=queue,
        )
        return RegisteredMachine.from_view(created, info.context.tz)

    @mutation(description="Let a machine claim jobs again (managers only).", extensions=manager())
    async def turn_machine_on(self, info: Info, id: int) -> Machine:
        principal = await info.context.principal()
        view = await machines.set_machine_status(info.context.services.db, principal.actor, id, True)
        return Machine.from_view(view, info.context.tz)

    @mutation(description="Stop a machine from claiming jobs (managers only).", extensions=manager())
    async def turn_machine_off(self, info: Info, id: int) -> Machine:
        principal = await info.context.principal()
        services = info.context.services
        view = await machines.set_machine_status(services.db, principal.actor, id, False, services.events)
        return Machine.from_view(view, info.context.tz)

    @mutation(
        description="Change an automation's limits at run time; omitted values stay, a timeoutSeconds "
        "of 0 removes its time limit (managers only).",
        extensions=manager(),
    )
    async def update_automation_settings(
        self,
        info: Info,
        key: str,
        max_concurrent_jobs: int | None = None,
        dev_mode: bool | None = None,
        enabled: bool | None = None,
        max_attempts: int | None = None,
        retry_backoff_seconds: int | None = None,
        retry_backoff_max_seconds: int | None = None,
        timeout_seconds: float | None = None,
    ) -> Automation:
        principal = await info.context.principal()
        updated = await update_settings(
            info.context.services.db,
            key,
            actor=principal.actor,
            max_concurrent_jobs=max_concurrent_jobs,
            dev_mode=dev_mode,
            enabled=enabled,
            retry_policy={
                "max_attempts": max_attempts,
                "retry_backoff_seconds": retry_backoff_seconds,
                "retry_backoff_max_seconds": retry_backoff_max_seconds,
            },
            timeout_seconds=timeout_seconds,
        )
        info.context.services.time_limits.forget()
        return Automation.from_definition(updated)
