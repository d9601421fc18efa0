"""SQLAlchemy models, the async engine and the migrations."""

from worker_automation.domain.vocabulary import OPEN_STATUSES, TERMINAL_STATUSES, JobStatus
from worker_automation.models.access import ApiKey, Machine, MachineStatus
from worker_automation.models.admin import AuditEntry, AutomationSetting
from worker_automation.models.attempt import Attempt, AttemptOutcome
from worker_automation.models.base import Base, utcnow
from worker_automation.models.directory import MANAGER_PERFIS, Cliente, Perfil, Usuario
from worker_automation.models.dispatch_key import DispatchKey
from worker_automation.models.job import (
    BUCKET_BITS,
    BUCKET_IDS,
    CELERY_STATE,
    FinishedCount,
    Job,
    JobBucketCount,
    JobCount,
    QueuedCount,
    row_status_is,
)
from worker_automation.models.queue_pause import QueuePause
from worker_automation.models.rollup import automation_rollups
from worker_automation.models.schedule import Schedule

__all__ = [
    "BUCKET_BITS",
    "BUCKET_IDS",
    "CELERY_STATE",
    "MANAGER_PERFIS",
    "OPEN_STATUSES",
    "TERMINAL_STATUSES",
    "ApiKey",
    "Attempt",
    "AttemptOutcome",
    "AuditEntry",
    "AutomationSetting",
    "Base",
    "Cliente",
    "DispatchKey",
    "FinishedCount",
    "Job",
    "JobBucketCount",
    "JobCount",
    "JobStatus",
    "Machine",
    "MachineStatus",
    "Perfil",
    "QueuePause",
    "QueuedCount",
    "Schedule",
    "Usuario",
    "automation_rollups",
    "row_status_is",
    "utcnow",
]
